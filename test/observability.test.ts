import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, sseEvents, startMarket, type Market } from './helpers/market.js'
import { keptLogs, moved, scrape as scrapeAt } from './helpers/ops.js'

const scrape = () => scrapeAt(m.server.metricsUrl!)

const logs = keptLogs()
const lines = logs.lines
let m: Market
beforeAll(async () => {
  m = await startMarket({
    funds: 2_000n,
    logger: logs.logger,
    edit: (c) => void (c.metrics = { host: '127.0.0.1', port: 0 }),
  })
})
afterAll(() => m?.close())

const SECRET = 'the secret prompt text 7f3a'
const body = (extra: Record<string, unknown> = {}) => ({
  model: 'svc/atlas@1',
  messages: [{ role: 'user', content: SECRET }],
  max_tokens: 16,
  ...extra,
})

describe('logs, metrics, health and timing', () => {
  it('counts each kind of request exactly, and writes one access line per request with no secret', async () => {
    const before = await scrape()
    const ids: string[] = []
    const plain = await chat(m.url, m.key, body())
    ids.push(plain.headers.get('x-request-id')!)
    expect(plain.headers.get('server-timing')).toMatch(/^gateway;dur=[\d.]+, upstream;dur=[\d.]+$/)
    const plainCost = (await plain.json()).svc.cost_usdc
    const stream = await chat(m.url, m.key, body({ stream: true }))
    ids.push(stream.headers.get('x-request-id')!)
    expect(stream.headers.get('server-timing')).toMatch(/^gateway;dur=[\d.]+, upstream;dur=[\d.]+$/)
    await sseEvents(stream)
    const refused = await chat(m.url, m.key, body({ max_tokens: 4000 }))
    expect(refused.status).toBe(402)
    expect(refused.headers.get('server-timing')).toMatch(/^gateway;dur=[\d.]+$/)
    ids.push(refused.headers.get('x-request-id')!)
    m.sims.atlasCheap.setFault({ kind: 'status-500' })
    const failedOver = await chat(m.url, m.key, body())
    m.sims.atlasCheap.setFault({ kind: 'none' })
    expect(failedOver.status).toBe(200)
    ids.push(failedOver.headers.get('x-request-id')!)
    const after = await scrape()
    const L = (outcome: string, provider: string) =>
      `svc_requests_total{model="svc/atlas@1",provider="${provider}",outcome="${outcome}"}`
    const completed = [...after.keys()].filter((k) => k.includes('outcome="completed"') && k.includes('atlas'))
    const completedMoved = completed.reduce((s, k) => s + moved(before, after, k), 0)
    expect(completedMoved).toBe(3)
    expect(moved(before, after, L('insufficient_quota', 'none'))).toBe(1)
    expect(moved(before, after, 'svc_upstream_failures_total{kind="unavailable"}')).toBe(1)
    expect(moved(before, after, 'svc_request_duration_seconds_count{model="svc/atlas@1"}')).toBe(4)
    expect(moved(before, after, 'svc_time_to_first_byte_seconds_count{model="svc/atlas@1"}')).toBe(4)
    expect(moved(before, after, 'svc_gateway_duration_seconds_count{model="svc/atlas@1"}')).toBe(4)
    const records = await Promise.all(ids.map((id) => m.store.usage.get(m.accountId, id)))
    const billed = records.filter((r) => r?.outcome === 'completed')
    expect(billed).toHaveLength(3)
    const out = billed.reduce((n, r) => n + r!.completionTokens, 0)
    expect(moved(before, after, 'svc_tokens_total{model="svc/atlas@1",direction="out"}')).toBe(out)
    const charged = billed.reduce((n, r) => n + Number(r!.cost), 0) / 1e6
    expect(moved(before, after, 'svc_charged_usdc_total{model="svc/atlas@1"}')).toBeCloseTo(charged, 9)
    expect(Number(plainCost)).toBeGreaterThan(0)
    expect(after.has('process_cpu_user_seconds_total')).toBe(true)
    expect(after.get('svc_open_holds')).toBe(0)
    // Each request's hold and its capture (the 402's hold was refused: one operation) went through the hot ledger.
    expect(moved(before, after, 'svc_ledger_commit_operations_sum')).toBe(7)
    expect(moved(before, after, 'svc_ledger_commit_seconds_count')).toBe(
      moved(before, after, 'svc_ledger_commit_operations_count'),
    )
    expect(moved(before, after, 'svc_ledger_commit_operations_count')).toBeGreaterThanOrEqual(4)
    // One access line per request, with its id, and nothing secret.
    await expect.poll(() => ids.every((id) => lines.some((l) => l.req_id === id && l.msg === 'request'))).toBe(true)
    for (const id of ids) expect(lines.filter((l) => l.req_id === id && l.msg === 'request')).toHaveLength(1)
    const line = lines.find((l) => l.req_id === ids[0])!
    expect(line).toMatchObject({ status: 200, model: 'svc/atlas@1', outcome: 'completed', key_id: expect.any(String) })
    expect(line.wallet).toMatch(/^0x/)
    expect(lines.find((l) => l.req_id === ids[2])).toMatchObject({ status: 402, code: 'insufficient_quota' })
    expect(lines.find((l) => l.req_id === ids[3])).toMatchObject({ attempts: 2 })
    expect(logs.raw()).not.toContain(SECRET)
    expect(logs.raw()).not.toContain(m.key)
  })

  it('/healthz answers; /readyz turns 503 when no offer is live, and 200 again once one is', async () => {
    expect((await fetch(`${m.url}/healthz`)).status).toBe(200)
    expect(await (await fetch(`${m.url}/readyz`)).json()).toEqual({ status: 'ready' })
    const health = m.server.gateway.health
    const offers = [...m.server.gateway.catalog.offers.values()].flat()
    if (m.server.gateway.catalog.managed) offers.push(m.server.gateway.catalog.managed)
    for (const o of offers) {
      for (let i = 0; i < 3; i++) if (health.acquire(o.key, 1e9)) health.release(o.key, 'failure')
    }
    const down = await fetch(`${m.url}/readyz`)
    expect(down.status).toBe(503)
    expect((await down.json()).problems).toEqual(['no offer is live: every breaker is open'])
    for (const o of offers) {
      health.acquire(o.key, 1e9)
      health.release(o.key, 'success')
    }
    await expect.poll(async () => (await fetch(`${m.url}/readyz`)).status, { timeout: 5_000 }).toBe(200)
  })
})

describe('/readyz with a store that does not answer', () => {
  it('is 503 naming the store', async () => {
    const mk = await startMarket()
    try {
      const problems = mk.store.problems.bind(mk.store)
      mk.store.problems = async () => ['the store does not answer: connection refused']
      const res = await fetch(`${mk.url}/readyz`)
      expect(res.status).toBe(503)
      expect((await res.json()).problems[0]).toMatch(/the store does not answer/)
      mk.store.problems = problems
      expect((await fetch(`${mk.url}/readyz`)).status).toBe(200)
    } finally {
      await mk.close()
    }
  })
})
