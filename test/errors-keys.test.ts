import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, startMarket, type Market } from './helpers/market.js'
import { expectError } from './helpers/errors.js'
import { issueKey } from '../src/accounts/operations.js'

let m: Market
beforeAll(async () => {
  m = await startMarket()
})
afterAll(() => m?.close())

const msgs = [{ role: 'user', content: 'hi' }]

describe('keys', () => {
  it('refuses a missing key with invalid_api_key', async () => {
    const e = await expectError(
      await chat(m.url, undefined, { model: 'svc/atlas@1', messages: msgs }),
      401,
      'invalid_api_key',
      null,
    )
    expect(e.type).toBe('authentication_error')
  })
  it('refuses a key of no shape of ours without reading the store or keeping it', async () => {
    const keys = m.store.keys
    const ownerOf = keys.ownerOf.bind(keys)
    let lookups = 0
    keys.ownerOf = (hash) => (lookups++, ownerOf(hash))
    try {
      for (const key of [`svc_test_${'a'.repeat(8000)}`, 'svc_test_short', `svc_test_${'a'.repeat(39)}!`]) {
        const e = await expectError(
          await chat(m.url, key, { model: 'svc/atlas@1', messages: msgs }),
          401,
          'invalid_api_key',
          null,
        )
        expect(e.message).toBe('Unknown or revoked API key.')
      }
      expect(lookups).toBe(0)
      // One of the right shape is looked up (and unknown).
      await expectError(
        await chat(m.url, `svc_test_${'a'.repeat(40)}`, { model: 'svc/atlas@1', messages: msgs }),
        401,
        'invalid_api_key',
        null,
      )
      expect(lookups).toBe(1)
      // The key in use still passes.
      expect((await chat(m.url, m.key, { model: 'svc/atlas@1', messages: msgs, max_tokens: 3 })).status).toBe(200)
    } finally {
      keys.ownerOf = ownerOf
    }
  })
  it('says a key sent without the Bearer scheme is not read as one', async () => {
    const res = await fetch(`${m.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: m.key, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc/atlas@1', messages: msgs }),
    })
    const e = await expectError(res, 401, 'invalid_api_key', null)
    expect(e.message).toMatch(
      /^The Authorization header holds no Bearer key\. Send it as "Authorization: Bearer svc_test_…"/,
    )
  })
  it('writes the error object in the key order of the interface: type, code, param, message', async () => {
    const text = await (await chat(m.url, undefined, { model: 'svc/atlas@1', messages: msgs })).text()
    expect(Object.keys(JSON.parse(text).error)).toEqual(['type', 'code', 'param', 'message'])
  })
  it('refuses an unknown key and a key without the prefix', async () => {
    await expectError(
      await chat(m.url, 'svc_test_doesnotexist000000000000000000000000', { model: 'svc/atlas@1', messages: msgs }),
      401,
      'invalid_api_key',
      null,
    )
    await expectError(
      await chat(m.url, 'sk-openai-style', { model: 'svc/atlas@1', messages: msgs }),
      401,
      'invalid_api_key',
      null,
    )
  })
  it('invites a body (Expect: 100-continue) only once the key is known', async () => {
    const body = JSON.stringify({ model: 'svc/atlas@1', messages: msgs, max_tokens: 5 })
    const ask = async (key: string, target = '/v1/chat/completions') => {
      const socket = connect(Number(new URL(m.url).port), '127.0.0.1')
      let answer = ''
      socket.setEncoding('utf8').on('data', (d: string) => (answer += d))
      socket.write(
        `POST ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
      )
      await expect.poll(() => answer).toMatch(/^HTTP\/1.1 \d{3} /)
      const first = answer.split('\r\n')[0]
      if (first === 'HTTP/1.1 100 Continue') {
        socket.write(body)
        await expect.poll(() => answer).toMatch(/\r\n\r\nHTTP\/1.1 \d{3} [^]*\r\n\r\n\{/)
      }
      socket.destroy()
      return { first, final: /HTTP\/1.1 (?!100)(\d{3})/.exec(answer)![1] }
    }
    // A stranger is refused before it uploads anything.
    expect(await ask('svc_test_doesnotexist000000000000000000000000')).toEqual({
      first: 'HTTP/1.1 401 Unauthorized',
      final: '401',
    })
    expect(await ask('svc_test_doesnotexist000000000000000000000000', `http://x/v1/chat/completions`)).toEqual({
      first: 'HTTP/1.1 401 Unauthorized',
      final: '401',
    })
    // A good key is invited once, in either form of the request target.
    expect(await ask(m.key)).toEqual({ first: 'HTTP/1.1 100 Continue', final: '200' })
    expect(await ask(m.key, `http://x/v1/chat/completions`)).toEqual({ first: 'HTTP/1.1 100 Continue', final: '200' })
  })

  it('checks the key before the body: a stranger gets 401 whatever the body, and nothing of it is parsed', async () => {
    await expectError(await chat(m.url, undefined, '{"model": '), 401, 'invalid_api_key', null)
    const big = JSON.stringify({
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'x'.repeat(4 * 1024 * 1024 + 10) }],
    })
    await expectError(
      await chat(m.url, 'svc_test_doesnotexist000000000000000000000000', big),
      401,
      'invalid_api_key',
      null,
    )
    // With a good key the same bodies get their own errors.
    await expectError(await chat(m.url, m.key, '{"model": '), 400, 'feature_not_supported', null)
  })
  it('refuses a revoked key', async () => {
    const k = await issueKey({ now: Date.now(), store: m.store, accountId: m.accountId, name: 'short-lived' })
    expect((await chat(m.url, k.key, { model: 'svc/atlas@1', messages: msgs })).status).toBe(200)
    await m.store.keys.revoke(m.accountId, k.id, Date.now())
    await expectError(await chat(m.url, k.key, { model: 'svc/atlas@1', messages: msgs }), 401, 'invalid_api_key', null)
  })
  it('refuses a suspended account with account_suspended, then serves it again when resumed', async () => {
    await m.store.accounts.setStatus(m.accountId, 'suspended')
    try {
      const e = await expectError(
        await chat(m.url, m.key, { model: 'svc/atlas@1', messages: msgs }),
        403,
        'account_suspended',
        null,
      )
      expect(e.type).toBe('permission_error')
    } finally {
      await m.store.accounts.setStatus(m.accountId, 'active')
    }
    expect((await chat(m.url, m.key, { model: 'svc/atlas@1', messages: msgs })).status).toBe(200)
  })
})
