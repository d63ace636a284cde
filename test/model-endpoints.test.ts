import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, P, startMarket, type Market } from './helpers/market.js'

interface Endpoint {
  provider: string
  model: string
  status: string
  input_price_per_mtok: string
  context_length: number | null
  max_output_tokens: number | null
  ttft_p50_ms: number | null
  throughput_p50_tps: number | null
  uptime: Record<'5m' | '1h' | '1d', number | null>
}

/** GET /v1/models/{id}/endpoints: each offer of a model, with what this gateway measured of it. No key needed. */
describe('model endpoints', () => {
  let m: Market
  beforeAll(async () => {
    m = await startMarket({
      tuning: { firstByteTimeoutMs: 2_000, replyTimeoutMs: 5_000, breakerFailures: 50, offerProbeIntervalMs: 0 },
    })
  })
  afterAll(() => m?.close())

  const endpoints = async (id: string) => {
    const res = await fetch(`${m.url}/v1/models/${id}/endpoints`)
    expect(res.status).toBe(200)
    return (await res.json()) as { model: string; data: Endpoint[] }
  }
  const of = (list: { data: Endpoint[] }, provider: string) => list.data.find((e) => e.provider === provider)!
  const send = (provider: string) =>
    chat(m.url, m.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 8,
      provider: { only: [provider] },
    })

  it('lists each offer with its prices and bounds, unmeasured before traffic', async () => {
    const list = await endpoints('svc/atlas@1')
    expect(list.model).toBe('svc/atlas@1')
    expect(list.data.map((e) => e.provider).sort()).toEqual([P.atlasCheap, P.atlasDear].sort())
    expect(of(list, P.atlasCheap)).toMatchObject({
      model: 'svc/atlas@1',
      status: 'live',
      input_price_per_mtok: '150000',
      context_length: 32768,
      max_output_tokens: 4096,
      ttft_p50_ms: null,
      throughput_p50_tps: null,
      uptime: { '5m': null, '1h': null, '1d': null },
    })
    // The encoded id, as SDKs send it, works too; an unknown model is 404 model_not_found.
    expect((await fetch(`${m.url}/v1/models/svc%2Fatlas@1/endpoints`)).status).toBe(200)
    const unknown = await fetch(`${m.url}/v1/models/svc/nope@1/endpoints`)
    expect(unknown.status).toBe(404)
    expect((await unknown.json()).error.code).toBe('model_not_found')
  })

  it('shows latency that moves when a provider is slowed and uptime that falls when it fails', async () => {
    for (let i = 0; i < 3; i++) expect((await send(P.atlasCheap)).status).toBe(200)
    for (let i = 0; i < 3; i++) expect((await send(P.atlasDear)).status).toBe(200)
    const before = await endpoints('svc/atlas@1')
    expect(of(before, P.atlasCheap).uptime['5m']).toBe(1)
    expect(of(before, P.atlasCheap).ttft_p50_ms).not.toBeNull()
    m.sims.atlasDear.setFault({ kind: 'slow', ms: 200 })
    for (let i = 0; i < 5; i++) await (await send(P.atlasDear)).text()
    m.sims.atlasCheap.setFault({ kind: 'status-500' })
    for (let i = 0; i < 3; i++) await (await send(P.atlasCheap)).text()
    m.sims.atlasDear.setFault({ kind: 'none' })
    m.sims.atlasCheap.setFault({ kind: 'none' })
    const after = await endpoints('svc/atlas@1')
    expect(of(after, P.atlasDear).ttft_p50_ms!).toBeGreaterThan(of(before, P.atlasDear).ttft_p50_ms! + 100)
    expect(of(after, P.atlasCheap).uptime).toEqual({ '5m': 0.5, '1h': 0.5, '1d': 0.5 })
    expect(of(after, P.atlasDear).uptime['1d']).toBe(1)
  })

  it('measures idle offers by probing them: uptime and time to first token without traffic', async () => {
    expect(of(await endpoints('svc/tern@2'), P.tern).uptime['5m']).toBeNull()
    m.sims.wren.setFault({ kind: 'status-500' })
    try {
      expect(await m.server.gateway.probes.probeIdle()).toBeGreaterThanOrEqual(6)
    } finally {
      m.sims.wren.setFault({ kind: 'none' })
    }
    const tern = of(await endpoints('svc/tern@2'), P.tern)
    expect(tern.uptime).toEqual({ '5m': 1, '1h': 1, '1d': 1 })
    expect(tern.ttft_p50_ms).not.toBeNull()
    expect(of(await endpoints('svc/wren@1'), P.wren).uptime['5m']).toBe(0)
    // A probe moves no breaker: the faulted provider still serves its next request.
    expect(of(await endpoints('svc/wren@1'), P.wren).status).toBe('live')
  })

  it('lists svc/cortex@1 as its candidates and its vendor', async () => {
    const list = await endpoints('svc/cortex@1')
    const byModel = new Set(list.data.filter((e) => e.provider !== 'managed').map((e) => e.model))
    expect(byModel).toEqual(new Set(['svc/atlas@1', 'svc/tern@2', 'svc/wren@1']))
    expect(list.data.filter((e) => e.provider === 'managed')).toHaveLength(1)
  })
})
