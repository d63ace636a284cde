import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, chatWith, sseEvents, startMarket, type Market } from './helpers/market.js'
import { keptLogs, moved, scrape as scrapeAt } from './helpers/ops.js'
import { formatUsdc } from '../src/money/usdc.js'

/** Metrics and log lines of the money: interrupted streams, what they charged, and settlement. */
const logs = keptLogs()
let m: Market
beforeAll(async () => {
  // Slow streams, so that a client can leave in the middle of one.
  m = await startMarket({
    sim: { chunkDelayMs: 20, replyTokens: 40 },
    logger: logs.logger,
    edit: (c) => void (c.metrics = { host: '127.0.0.1', port: 0 }),
  })
})
afterAll(() => m?.close())

const scrape = () => scrapeAt(m.server.metricsUrl!)
const MODEL = 'model="svc/atlas@1"'
const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hello' }], max_tokens: 40, stream: true }

/** Streams a request and leaves once a few content chunks arrived; its request id. */
async function leaveMidStream(): Promise<string> {
  const ac = new AbortController()
  const res = await chatWith(m.url, m.key, body, { signal: ac.signal })
  expect(res.status).toBe(200)
  const reader = res.body!.getReader()
  let seen = ''
  while (seen.split('"content":"').length < 5) seen += new TextDecoder().decode((await reader.read()).value)
  await reader.cancel()
  ac.abort()
  return res.headers.get('x-request-id')!
}

describe('metrics of interrupted streams and settlement', () => {
  it('counts a stream the provider broke (nothing charged) and one the client left (what reached it charged)', async () => {
    const before = await scrape()
    m.sims.atlasCheap.setFault({ kind: 'break-after', chunks: 3 })
    const broken = await chat(m.url, m.key, body)
    expect((await sseEvents(broken)).at(-2)).toContain('stream_interrupted')
    m.sims.atlasCheap.setFault({ kind: 'none' })
    const left = await leaveMidStream()
    const record = await expect
      .poll(() => m.store.usage.get(m.accountId, left), { timeout: 5_000 })
      .toMatchObject({ outcome: 'client_closed' })
      .then(() => m.store.usage.get(m.accountId, left))
    expect(record!.cost).toBeGreaterThan(0n)
    let after = await scrape()
    const outcome = (name: string) =>
      [...after.keys()]
        .filter((k) => k.startsWith('svc_requests_total{') && k.includes(MODEL) && k.includes(`outcome="${name}"`))
        .reduce((n, k) => n + moved(before, after, k), 0)
    // The request is observed when its handling ends, which may follow the usage record.
    await expect.poll(async () => ((after = await scrape()), outcome('client_closed'))).toBe(1)
    expect(outcome('stream_interrupted')).toBe(1)
    expect(outcome('client_closed')).toBe(1)
    expect(outcome('completed')).toBe(0)
    expect(moved(before, after, `svc_charged_usdc_total{${MODEL}}`)).toBeCloseTo(Number(record!.cost) / 1e6, 9)
    expect(moved(before, after, `svc_tokens_total{${MODEL},direction="out"}`)).toBe(record!.completionTokens)
    expect(after.get('svc_open_holds')).toBe(0)
    expect(logs.lines.filter((l) => l.req_id === left)).toEqual([
      expect.objectContaining({ msg: 'request', outcome: 'client_closed', cost_usdc: formatUsdc(record!.cost) }),
    ])
  })

  it('shows what waits for settlement, then counts the batches a pass settles and logs each', async () => {
    expect((await chat(m.url, m.key, { ...body, stream: false })).status).toBe(200)
    const before = await scrape()
    const waiting = before.get('svc_unsettled_usdc')!
    expect(waiting).toBeGreaterThan(0)
    const pass = await m.server.settler.runOnce()
    expect(pass.batches.length).toBeGreaterThan(0)
    const after = await scrape()
    const total = pass.batches.reduce((n, b) => n + Number(b.total), 0) / 1e6
    expect(total).toBeCloseTo(waiting, 9)
    expect(after.get('svc_unsettled_usdc')).toBe(0)
    expect(moved(before, after, 'svc_settlement_batches_total{outcome="settled"}')).toBe(pass.batches.length)
    expect(moved(before, after, 'svc_settled_usdc_total')).toBeCloseTo(total, 9)
    for (const b of pass.batches)
      expect(logs.lines.find((l) => l.batch_id === b.id)).toMatchObject({
        msg: 'settlement batch settled',
        legs: b.legs,
      })
  })
})
