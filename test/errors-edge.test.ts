import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, startMarket, type Market } from './helpers/market.js'
import { expectError, raw } from './helpers/errors.js'
import { STORE_KINDS, postgresReachable } from './helpers/stores.js'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { signIn } from './helpers/portal.js'

/** Client input at the edges must get an error of the contract (docs/architecture.md §3), never an internal error. */

describe.each(STORE_KINDS)('edge input on %s', (kind) => {
  let m: Market
  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    m = await startMarket({ store: kind })
  })
  afterAll(() => m?.close())

  it('refuses a max_tokens whose maximum cost no store integer holds with insufficient_quota, not an internal error', async () => {
    for (const max_tokens of [1e18, 1e300]) {
      const e = await expectError(
        await chat(m.url, m.key, { model: 'svc/cortex@1', messages: [{ role: 'user', content: 'hi' }], max_tokens }),
        402,
        'insufficient_quota',
        null,
      )
      expect(e.message).toContain('Nothing was charged')
    }
    expect((await m.store.accounts.byId(m.accountId))!).toMatchObject({ balance: 10_000_000n, held: 0n })
    expect(await m.store.usage.list(m.accountId, { limit: 5 })).toEqual([])
    await m.server.gateway.refusals.flush()
    const refused = await m.store.refusals.list(m.accountId, 0, 10)
    // Counted per minute: the two may straddle a minute's end.
    expect(new Set(refused.map((r) => r.code))).toEqual(new Set(['insufficient_quota']))
    expect(refused.reduce((n, r) => n + r.count, 0)).toBe(2)
  })

  it('answers a Responses reference holding a NUL as one to nothing kept, naming its field', async () => {
    const send = (body: object) =>
      fetch(`${m.url}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${m.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc/atlas@1', max_output_tokens: 16, ...body }),
      })
    const previous = await send({ input: 'more', previous_response_id: 'resp_\u0000' })
    expect((await expectError(previous, 400, 'feature_not_supported', 'previous_response_id')).message).toMatch(/kept/)
    const reference = await send({ input: [{ type: 'item_reference', id: 'msg_\u0000' }] })
    expect((await expectError(reference, 400, 'feature_not_supported', 'input[0].id')).message).toMatch(/kept/)
  })

  it("answers a provider's offer action on a model name holding a NUL with 404, naming the model", async () => {
    const provider = await signIn(m.url, privateKeyToAccount(generatePrivateKey()))
    const body = { base_url: m.sims.atlasCheap.url, bundle: 'b', profile: 'p' }
    const endpoint = await (await provider.call('POST', '/provider/endpoints', body)).json()
    for (const action of ['pause', 'resume', 'withdraw'])
      await expectError(
        await provider.call('POST', `/provider/endpoints/${endpoint.id}/offers/${action}`, {
          model: 'svc/atlas@1\u0000',
        }),
        404,
        'feature_not_supported',
        'model',
      )
  })

  it('refuses a NUL character in a path or query parameter with 400, which no store could look up', async () => {
    const auth = { authorization: `Bearer ${m.key}` }
    for (const path of [
      '/v1/usage?model=%00',
      '/v1/usage?key_id=a%00',
      '/v1/usage?after=%00',
      '/v1/usage/%00',
      '/v1/usage/req_%00/proof',
      '/v1/models/%00',
    ])
      expect(
        (await expectError(await fetch(m.url + path, { headers: auth }), 400, 'feature_not_supported', null)).message,
      ).toMatch(/NUL/)
    // A literal "%00" in a parameter, encoded, is only text.
    const res = await fetch(`${m.url}/v1/usage?model=%2500`, { headers: auth })
    expect(res.status).toBe(200)
    expect((await res.json()).data).toEqual([])
  })
})

describe('edge URLs and query strings', () => {
  let m: Market
  beforeAll(async () => {
    // A reply budget beyond the slowed request below, so it is served where it was held and not failed over under load.
    m = await startMarket({ tuning: { replyTimeoutMs: 10_000 } })
  })
  afterAll(() => m?.close())
  const auth = () => ({ authorization: `Bearer ${m.key}` })

  it('answers a malformed URL in the one error shape with a request id', async () => {
    await expectError(await fetch(`${m.url}/v1/usage/%zz`, { headers: auth() }), 400, 'feature_not_supported', null)
  })

  it('refuses a repeated query parameter of GET /v1/usage, naming it', async () => {
    for (const p of ['after', 'model', 'key_id']) {
      await expectError(
        await fetch(`${m.url}/v1/usage?${p}=a&${p}=b`, { headers: auth() }),
        400,
        'feature_not_supported',
        p,
      )
    }
  })

  it('refuses a repeated query parameter of the portal usage routes, naming it', async () => {
    const c = await signIn(m.url, privateKeyToAccount(generatePrivateKey()))
    await expectError(await c.call('GET', '/usage?model=a&model=b'), 400, 'feature_not_supported', 'model')
    await expectError(await c.call('GET', '/usage/summary?key_id=a&key_id=b'), 400, 'feature_not_supported', 'key_id')
  })

  it('refuses a page cursor that names no record of the account, and a limit that is not plain digits', async () => {
    const e = await expectError(
      await fetch(`${m.url}/v1/usage?after=req_gone`, { headers: auth() }),
      400,
      'feature_not_supported',
      'after',
    )
    expect(e.message).toContain('last_id')
    for (const limit of ['0x10', '%205', '1e1'])
      await expectError(
        await fetch(`${m.url}/v1/usage?limit=${limit}`, { headers: auth() }),
        400,
        'feature_not_supported',
        'limit',
      )
    expect((await fetch(`${m.url}/v1/usage?limit=5`, { headers: auth() })).status).toBe(200)
  })

  it('checks the key before a request id of any length, and does not repeat a long one whole', async () => {
    const id = 'a'.repeat(3000)
    await expectError(await fetch(`${m.url}/v1/usage/${id}`), 401, 'invalid_api_key', null)
    const e = await expectError(
      await fetch(`${m.url}/v1/usage/${id}`, { headers: auth() }),
      404,
      'feature_not_supported',
      'request_id',
    )
    expect(e.message.length).toBeLessThan(200)
  })

  it('says what is wrong with a Content-Type header that is no media type', async () => {
    const res = await fetch(`${m.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': ';;;===' },
      body: '{}',
    })
    expect((await expectError(res, 415, 'feature_not_supported', null)).message).toContain('application/json')
  })

  it('ends a stream asked with Connection: close by closing the connection', async () => {
    const body = JSON.stringify({
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 5,
      stream: true,
    })
    const reply = await raw(
      m.url,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${m.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    )
    const [head] = reply.split('\r\n\r\n')
    expect(head).toMatch(/^HTTP\/1.1 200 /)
    expect(head).toMatch(/\r\nconnection: close\r\n/i)
    expect(head).not.toMatch(/keep-alive/i)
    expect(reply).toContain('data: [DONE]')
    // And a keep-alive stream stays open for the next request, as before.
    const kept = await fetch(`${m.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body,
    })
    expect(kept.headers.get('connection')).toBe('keep-alive')
    await kept.text()
  })

  it('refuses a compressed body with 415, saying to send it uncompressed', async () => {
    const { gzipSync } = await import('node:zlib')
    const res = await fetch(`${m.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify({ model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }] })),
    })
    const e = await expectError(res, 415, 'feature_not_supported', null)
    expect(e.message).toBe('The request body is encoded (Content-Encoding: gzip); send it uncompressed.')
    // identity is no encoding.
    const plain = await fetch(`${m.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json', 'content-encoding': 'identity' },
      body: JSON.stringify({ model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }),
    })
    expect(plain.status).toBe(200)
  })

  describe('requests Node cannot read', () => {
    it.each([
      ['malformed HTTP', 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 400],
      ['an unknown method', 'FOO /v1/models HTTP/1.1\r\nHost: x\r\n\r\n', 400],
      [
        'headers over the limit',
        `GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'a'.repeat(20_000)}\r\n\r\n`,
        431,
      ],
    ])('answers %s in the one error shape with a request id, then closes', async (_what, bytes, status) => {
      const reply = await raw(m.url, bytes)
      const [head, body] = reply.split('\r\n\r\n')
      expect(head).toMatch(new RegExp(`^HTTP/1.1 ${status} `))
      expect(head).toMatch(/\r\nx-request-id: req_[0-9A-Z]{26}\r\n/)
      expect(head).toMatch(/\r\nconnection: close/)
      expect(JSON.parse(body!).error).toMatchObject({
        type: 'invalid_request_error',
        code: 'feature_not_supported',
        param: null,
      })
      expect(JSON.parse(body!).error.message.length).toBeGreaterThan(20)
    })

    it('answers a request not received whole within requestTimeoutMs with 408, on time', async () => {
      const slow = await startMarket({ tuning: { requestTimeoutMs: 400 } })
      try {
        const started = performance.now()
        const reply = await raw(
          slow.url,
          `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${slow.key}\r\nContent-Length: 100\r\n\r\n{"model"`,
        )
        const waited = performance.now() - started
        const [head, body] = reply.split('\r\n\r\n')
        expect(head).toMatch(/^HTTP\/1.1 408 /)
        expect(head).toMatch(/\r\nx-request-id: req_[0-9A-Z]{26}\r\n/)
        expect(JSON.parse(body!).error).toMatchObject({
          code: 'feature_not_supported',
          param: null,
          message: expect.stringContaining('0.4 s'),
        })
        // Node looks for late requests every second at most, not every 30 s.
        expect(waited).toBeGreaterThanOrEqual(350)
        expect(waited).toBeLessThan(2_500)
      } finally {
        await slow.close()
      }
    })

    it('answers a request without a Host header in the one error shape, as HTTP/1.1 asks', async () => {
      for (const path of ['/v1/models', '/v1/chat/completions']) {
        const reply = await raw(m.url, `GET ${path} HTTP/1.1\r\nConnection: close\r\n\r\n`)
        const [head, body] = reply.split('\r\n\r\n')
        expect(head).toMatch(/^HTTP\/1.1 400 /)
        expect(head).toMatch(/\r\nx-request-id: req_[0-9A-Z]{26}\r\n/)
        expect(JSON.parse(body!).error).toMatchObject({
          code: 'feature_not_supported',
          param: null,
          message: expect.stringContaining('Host'),
        })
      }
      // HTTP/1.0 has no Host header to require.
      expect(await raw(m.url, 'GET /v1/models HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1.1 200 /)
    })

    it('sends the response owed to a request before unreadable bytes pipelined after it, then closes', async () => {
      const reply = await raw(
        m.url,
        'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\nFOO /v1/models HTTP/1.1\r\nHost: x\r\n\r\nmore garbage\r\n\r\n',
      )
      // One response, the models list: a refusal after it would be read as the answer to a request never sent.
      expect(reply.match(/HTTP\/1.1 /g)).toHaveLength(1)
      expect(reply).toMatch(/^HTTP\/1.1 200 /)
      expect(reply).toContain('"object":"list"')
    })

    it('finishes a request still being served when bytes pipelined after it cannot be read, never answering them', async () => {
      // Slow enough that the pipelined bytes arrive while the request is served, on a busy machine too.
      m.sims.atlasCheap.setFault({ kind: 'slow', ms: 1_500 })
      try {
        const before = (await m.store.accounts.byId(m.accountId))!.balance
        const body = JSON.stringify({
          model: 'svc/atlas@1',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 10,
        })
        const request = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${m.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
        const { hostname, port } = new URL(m.url)
        const socket = connect(Number(port), hostname, () => socket.write(request))
        let reply = ''
        socket.setEncoding('utf8').on('data', (d: string) => (reply += d))
        const closed = new Promise((resolve) => socket.on('close', resolve))
        await expect.poll(() => m.sims.atlasCheap.stats.active).toBe(1)
        socket.write('FOO /v1/models HTTP/1.1\r\nHost: x\r\n\r\n')
        await closed
        // The chat request's own reply, whole, and nothing after it: a 400 would be read as a reply to a request.
        expect(reply.match(/HTTP\/1.1 /g)).toHaveLength(1)
        const [head, text] = reply.split('\r\n\r\n')
        expect(head).toMatch(/^HTTP\/1.1 200 /)
        expect(head).toMatch(/\r\nconnection: close/i)
        expect(JSON.parse(text!).object).toBe('chat.completion')
        await expect.poll(() => m.server.gateway.lifecycle.inFlight).toBe(0)
        const after = (await m.store.accounts.byId(m.accountId))!
        expect(after.held).toBe(0n)
        expect(after.balance).toBeLessThan(before)
      } finally {
        m.sims.atlasCheap.setFault({ kind: 'none' })
      }
    })
  })
})
