import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { chat, marketPerTest } from './helpers/market.js'

const market = marketPerTest()
const ask = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hello' }], max_tokens: 40, stream: true }

/** Reads a stream until `enough` says so; the reader is returned to read the rest. */
async function readUntil(res: Response, enough: (text: string) => boolean) {
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let text = ''
  while (!enough(text)) {
    const { value, done } = await reader.read()
    if (done) break
    text += decoder.decode(value)
  }
  const rest = async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read()
        if (done) return text
        text += decoder.decode(value)
      }
    } catch {
      return text
    }
  }
  return { text, rest }
}

/**
 * A gateway that stops (SIGTERM) lets requests in flight finish and charges them; what it must cut pays what it
 * delivered.
 */
describe('stopping the gateway', () => {
  it('lets a stream in flight finish, charges it, and refuses new requests meanwhile', async () => {
    const m = await market({ sim: { chunkDelayMs: 30, replyTokens: 30 }, tuning: { shutdownGraceMs: 10_000 } })
    const res = await chat(m.url, m.key, ask)
    const requestId = res.headers.get('x-request-id')!
    const { rest } = await readUntil(res, (t) => t.split('"content":"').length > 3)
    // A client whose request is half sent as the gateway begins to stop.
    const late = connect(Number(new URL(m.url).port), '127.0.0.1')
    let answer = ''
    late.setEncoding('utf8').on('data', (d: string) => (answer += d))
    const body = JSON.stringify(ask)
    await new Promise<void>((resolve) =>
      late.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n', () => resolve()),
    )
    // A load balancer's health check on a connection it keeps open.
    const probe = connect(Number(new URL(m.url).port), '127.0.0.1')
    let probed = ''
    probe.setEncoding('utf8').on('data', (d: string) => (probed += d))
    await new Promise((resolve) => probe.once('connect', resolve))
    const stopping = m.server.close()
    await new Promise((resolve) => setTimeout(resolve, 100))
    probe.write('GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n')
    await expect.poll(() => probed).toMatch(/^HTTP\/1.1 503 /)
    await expect.poll(() => probed).toContain('is stopping and takes no new requests')
    probe.destroy()
    late.write(
      `Authorization: Bearer ${m.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    )
    const text = await rest()
    await stopping
    // Refused in the one error shape, to be retried: not Fastify's own 503.
    await expect.poll(() => answer).toMatch(/^HTTP\/1.1 503 /)
    expect(answer).toMatch(/\r\nx-request-id: req_/)
    expect(answer).toMatch(/\r\nretry-after: 1\r\n/)
    expect(JSON.parse(answer.split('\r\n\r\n')[1]!).error).toMatchObject({
      code: 'no_capacity',
      message: expect.stringContaining('stopping'),
    })
    late.destroy()
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
    expect(text).toContain('"svc":{')
    const record = (await m.store.usage.get(m.accountId, requestId))!
    expect(record).toMatchObject({ outcome: 'completed', completionTokens: 30 })
    expect(record.cost).toBeGreaterThan(0n)
    expect((await m.store.accounts.byId(m.accountId))!.held).toBe(0n)
    await expect(chat(m.url, m.key, ask)).rejects.toThrow()
  })

  it('ends a stream still running after shutdownGraceMs with stream_interrupted and [DONE], and charges nothing', async () => {
    const log: string[] = []
    const m = await market({
      sim: { chunkDelayMs: 100, replyTokens: 40 },
      tuning: { shutdownGraceMs: 200 },
      log: (msg) => log.push(msg),
    })
    const res = await chat(m.url, m.key, ask)
    const requestId = res.headers.get('x-request-id')!
    const { rest } = await readUntil(res, (t) => t.split('"content":"').length > 2)
    await m.server.close()
    const text = await rest()
    // The client learns the reply is not whole (an SDK would take a stream that just stops for a whole one).
    const events = text
      .trimEnd()
      .split('\n\n')
      .map((e) => e.replace(/^data: /, ''))
    expect(events.at(-1)).toBe('[DONE]')
    expect(JSON.parse(events.at(-2)!).error).toMatchObject({
      code: 'stream_interrupted',
      message: expect.stringContaining('stopping'),
    })
    const record = (await m.store.usage.get(m.accountId, requestId))!
    expect(record).toMatchObject({ outcome: 'stream_interrupted', cost: 0n })
    expect((await m.store.accounts.byId(m.accountId))!.held).toBe(0n)
    expect(await m.store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
    // The operator's log says what the stop did, in words.
    expect(log).toEqual(
      expect.arrayContaining([
        'stopping: 1 request in flight, given up to 200 ms to finish',
        'stopping: 1 request still running after 200 ms ended (answered as failures to retry, charged nothing)',
      ]),
    )
  })

  it('answers a request whose body arrives after shutdownGraceMs with 503, not a stream cut off and charged', async () => {
    const m = await market({ sim: { chunkDelayMs: 100, replyTokens: 40 }, tuning: { shutdownGraceMs: 200 } })
    const late = connect(Number(new URL(m.url).port), '127.0.0.1')
    let answer = ''
    late.setEncoding('utf8').on('data', (d: string) => (answer += d))
    const body = JSON.stringify(ask)
    // Its headers come before the stop, its body after the grace: it reaches its upstream once the others were ended.
    await new Promise<void>((resolve) =>
      late.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${m.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
        () => resolve(),
      ),
    )
    await new Promise((resolve) => setTimeout(resolve, 100))
    const stopping = m.server.close()
    await new Promise((resolve) => setTimeout(resolve, 400))
    late.write(body)
    await expect.poll(() => answer).toMatch(/^HTTP\/1.1 503 /)
    await stopping
    late.destroy()
    expect(answer).toMatch(/\r\nretry-after: 1\r\n/)
    expect(answer).toContain('"code":"no_capacity"')
    const requestId = /\r\nx-request-id: (req_\w+)/.exec(answer)![1]!
    expect(await m.store.usage.get(m.accountId, requestId)).toMatchObject({ outcome: 'no_capacity', cost: 0n })
    expect((await m.store.accounts.byId(m.accountId))!.held).toBe(0n)
  })

  it('answers a plain request still waiting after shutdownGraceMs with 503 and Retry-After, and charges nothing', async () => {
    // A reply budget beyond the slow upstreams: the request is still waiting at its first offer when the grace ends.
    const m = await market({ tuning: { shutdownGraceMs: 200, replyTimeoutMs: 10_000 } })
    for (const s of [m.sims.atlasCheap, m.sims.atlasDear]) s.setFault({ kind: 'slow', ms: 5_000 })
    const pending = chat(m.url, m.key, { ...ask, stream: false })
    await expect.poll(async () => (await m.store.accounts.byId(m.accountId))!.held).toBeGreaterThan(0n)
    const stopping = m.server.close()
    const res = await pending
    expect(res.status).toBe(503)
    expect(res.headers.get('retry-after')).toBe('1')
    const requestId = res.headers.get('x-request-id')!
    expect((await res.json()).error).toMatchObject({
      code: 'no_capacity',
      message: expect.stringContaining('stopping'),
    })
    await stopping
    expect(await m.store.usage.get(m.accountId, requestId)).toMatchObject({ outcome: 'no_capacity', cost: 0n })
    expect((await m.store.accounts.byId(m.accountId))!.held).toBe(0n)
  })
})
