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

/** A gateway that stops (SIGTERM) lets requests in flight finish and charges them; what it must cut pays what it delivered. */
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
    await new Promise<void>((resolve) => late.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n', () => resolve()))
    const stopping = m.server.close()
    await new Promise((resolve) => setTimeout(resolve, 100))
    late.write(`Authorization: Bearer ${m.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`)
    const text = await rest()
    await stopping
    // Refused in the one error shape, to be retried: not Fastify's own 503.
    await expect.poll(() => answer).toMatch(/^HTTP\/1.1 503 /)
    expect(answer).toMatch(/\r\nx-request-id: req_/)
    expect(answer).toMatch(/\r\nretry-after: 1\r\n/)
    expect(JSON.parse(answer.split('\r\n\r\n')[1]!).error).toMatchObject({ code: 'no_capacity', message: expect.stringContaining('stopping') })
    late.destroy()
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
    expect(text).toContain('"svc":{')
    const record = (await m.store.usage.get(m.accountId, requestId))!
    expect(record).toMatchObject({ outcome: 'completed', completionTokens: 30 })
    expect(record.cost).toBeGreaterThan(0n)
    expect((await m.store.accounts.byId(m.accountId))!.held).toBe(0n)
    await expect(chat(m.url, m.key, ask)).rejects.toThrow()
  })

  it('cuts a stream still running after shutdownGraceMs, and charges what it delivered', async () => {
    const m = await market({ sim: { chunkDelayMs: 100, replyTokens: 40 }, tuning: { shutdownGraceMs: 200 } })
    const res = await chat(m.url, m.key, ask)
    const requestId = res.headers.get('x-request-id')!
    const { rest } = await readUntil(res, (t) => t.split('"content":"').length > 2)
    await m.server.close()
    const text = await rest()
    expect(text).not.toContain('[DONE]')
    const record = (await m.store.usage.get(m.accountId, requestId))!
    expect(record.outcome).toBe('client_closed')
    expect(record.completionTokens).toBeGreaterThan(0)
    expect(record.completionTokens).toBeLessThan(40)
    expect(record.cost).toBeGreaterThan(0n)
    expect((await m.store.accounts.byId(m.accountId))!.held).toBe(0n)
    expect(await m.store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })
})
