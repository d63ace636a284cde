import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { issueKey } from '../src/accounts/operations.js'
import { chat, chatWith, P, sseEvents, startMarket, type Market } from './helpers/market.js'
import { keptLogs, moved, scrape as scrapeAt } from './helpers/ops.js'

/** One access line per HTTP request, whatever its end, and the metrics of a known mix of requests. */
const logs = keptLogs()
let m: Market
beforeAll(async () => {
  // Slow streams, so that a client can leave in the middle of one; funds for a few requests, not for a large one.
  m = await startMarket({
    funds: 2_000n,
    sim: { chunkDelayMs: 20, replyTokens: 40 },
    logger: logs.logger,
    edit: (c) => void (c.metrics = { host: '127.0.0.1', port: 0 }),
  })
})
afterAll(() => m?.close())

const scrape = () => scrapeAt(m.server.metricsUrl!)
const body = (extra: Record<string, unknown> = {}) => ({
  model: 'svc/atlas@1',
  messages: [{ role: 'user', content: 'hello' }],
  max_tokens: 16,
  ...extra,
})
const idOf = (res: Response) => res.headers.get('x-request-id')!

/** Writes `text` on a fresh connection and ends it, after reading the answer if one comes; the answer's text. */
function raw(text: string, closeAfterMs = 200): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(m.url).port), '127.0.0.1')
    let answer = ''
    socket.on('data', (d) => (answer += d.toString()))
    socket.on('error', reject)
    socket.on('close', () => resolve(answer))
    socket.write(text, () => setTimeout(() => socket.destroy(), closeAfterMs))
  })
}

describe('access lines and metrics of a mix of requests', () => {
  it('writes exactly one line per request, with its id, provider and charge, and moves each counter once', async () => {
    const before = await scrape()
    const linesBefore = logs.lines.length
    const ids: string[] = []
    const keep = async (res: Response) => (ids.push(idOf(res)), res)

    const plain = await keep(await chat(m.url, m.key, body()))
    expect(plain.status).toBe(200)
    await plain.json()

    const stream = await keep(await chat(m.url, m.key, body({ stream: true })))
    // The upstream answered before the headers went out: its share is named beside the gateway's.
    expect(stream.headers.get('server-timing')).toMatch(/^gateway;dur=[\d.]+, upstream;dur=[\d.]+$/)
    await sseEvents(stream)

    for (const key of [undefined, `svc_test_${'A'.repeat(40)}`]) {
      const res = await keep(await chat(m.url, key, body()))
      expect(res.status).toBe(401)
      await res.text()
    }
    const poor = await keep(await chat(m.url, m.key, body({ max_tokens: 4000 })))
    expect(poor.status).toBe(402)
    await poor.text()

    m.sims.atlasCheap.setFault({ kind: 'status-500' })
    const failedOver = await keep(await chat(m.url, m.key, body()))
    expect(failedOver.status).toBe(200)
    await failedOver.json()
    m.sims.atlasCheap.setFault({ kind: 'break-after', chunks: 3 })
    const interrupted = await keep(await chat(m.url, m.key, body({ stream: true })))
    expect((await sseEvents(interrupted)).at(-2)).toContain('stream_interrupted')
    m.sims.atlasCheap.setFault({ kind: 'none' })

    // A stream its client leaves after a few chunks.
    const ac = new AbortController()
    const left = await keep(await chatWith(m.url, m.key, body({ stream: true, max_tokens: 40 }), { signal: ac.signal }))
    const reader = left.body!.getReader()
    let seen = ''
    while (seen.split('"content":"').length < 4) seen += new TextDecoder().decode((await reader.read()).value)
    await reader.cancel()
    ac.abort()

    for (const path of ['/v1/nothing', '/portal/api/nothing']) {
      const res = await keep(await fetch(`${m.url}${path}`))
      expect(res.status).toBe(404)
      await res.text()
    }
    const large = await keep(
      await fetch(`${m.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${m.key}`, 'content-type': 'application/json' },
        body: 'x'.repeat(5 * 1024 * 1024),
      }),
    )
    expect(large.status).toBe(413)
    await large.text()

    const { key: limited } = await issueKey({
      store: m.store,
      accountId: m.accountId,
      name: 'rpm-1',
      limits: { rpm: 1, tpm: null },
      now: Date.now(),
    })
    const statuses: number[] = []
    for (let i = 0; i < 2; i++) {
      const res = await keep(await chat(m.url, limited, body()))
      statuses.push(res.status)
      await res.text()
    }
    // Two in one minute, unless the minute turned between them.
    expect(statuses[0]).toBe(200)

    // Malformed HTTP, answered by Node's refusal with an id of its own.
    const malformed = await raw('GARBAGE / HTTP/1.1\r\n\r\n')
    expect(malformed).toMatch(/^HTTP\/1\.1 400/)
    ids.push(/x-request-id: (\S+)/.exec(malformed)![1]!)
    // A request whose body never comes: its client gives up after its head.
    const unfinished = await raw(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${m.key}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"mo',
    )
    expect(unfinished).toBe('')

    const requestLines = () => logs.lines.slice(linesBefore).filter((l) => l.msg === 'request')
    // The unfinished request's line names its own id, which its client never saw.
    await expect.poll(() => requestLines().length, { timeout: 5_000 }).toBe(ids.length + 1)
    for (const id of ids) expect(requestLines().filter((l) => l.req_id === id)).toHaveLength(1)
    const line = (id: string) => requestLines().find((l) => l.req_id === id)!
    expect(line(ids[2]!)).toMatchObject({ status: 401, code: 'invalid_api_key', path: '/v1/chat/completions' })
    expect(line(ids[3]!)).toMatchObject({ status: 401, code: 'invalid_api_key' })
    expect(line(idOf(interrupted))).toMatchObject({
      status: 200,
      outcome: 'stream_interrupted',
      provider: P.atlasCheap,
      completion_tokens: 0,
      cost_usdc: '0.000000',
    })
    expect(line(idOf(left))).toMatchObject({ outcome: 'client_closed', provider: P.atlasCheap })
    expect(line(idOf(large))).toMatchObject({ status: 413, code: 'feature_not_supported' })
    expect(line(idOf(failedOver))).toMatchObject({ status: 200, provider: P.atlasDear, attempts: 2 })
    expect(line(ids.at(-1)!)).toMatchObject({ status: 400, code: 'feature_not_supported' })
    const cut = requestLines().find((l) => !ids.includes(l.req_id as string))!
    expect(cut).toMatchObject({ status: 499, code: 'client_closed', path: '/v1/chat/completions' })

    const after = await scrape()
    expect(moved(before, after, 'svc_upstream_failures_total{kind="unavailable"}')).toBe(1)
    expect(moved(before, after, 'svc_upstream_failures_total{kind="interrupted"}')).toBe(1)
  })

  it("names only the gateway's time on a stream whose headers a keep-alive sent before any upstream event", async () => {
    const slow = await startMarket({ tuning: { keepAliveMs: 50, firstByteTimeoutMs: 2_000, replyTimeoutMs: 2_000 } })
    try {
      for (const sim of [slow.sims.atlasCheap, slow.sims.atlasDear]) sim.setFault({ kind: 'slow', ms: 300 })
      const res = await chat(slow.url, slow.key, body({ stream: true }))
      expect(res.headers.get('server-timing')).toMatch(/^gateway;dur=[\d.]+$/)
      expect((await sseEvents(res)).at(-1)).toBe('[DONE]')
    } finally {
      await slow.close()
    }
  })
})
