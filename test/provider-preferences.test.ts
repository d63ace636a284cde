import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, P, sseEvents, startMarket, type Market } from './helpers/market.js'
import { expectError } from './helpers/errors.js'

const ask = (provider: unknown, over: Record<string, unknown> = {}) => ({
  model: 'svc/atlas@1',
  messages: [{ role: 'user', content: 'hi' }],
  max_tokens: 8,
  provider,
  ...over,
})

/** The `provider` object of a chat request: which offer serves it, reported in `svc.provider`. */
describe('provider preferences', () => {
  let m: Market
  beforeAll(async () => {
    m = await startMarket({ tuning: { firstByteTimeoutMs: 2_000, replyTimeoutMs: 5_000 } })
  })
  afterAll(() => m?.close())

  const servedBy = async (provider: unknown, over: Record<string, unknown> = {}) => {
    const res = await chat(m.url, m.key, ask(provider, over))
    expect(res.status, await res.clone().text()).toBe(200)
    return (await res.json()).svc.provider as string
  }

  it('serves the cheapest live offer without preferences, and the one `only`, `ignore` or `order` name with them', async () => {
    expect(await servedBy(undefined)).toBe(P.atlasCheap)
    expect(await servedBy({ only: [P.atlasDear] })).toBe(P.atlasDear)
    expect(await servedBy({ only: [P.atlasDear.toLowerCase()] })).toBe(P.atlasDear)
    expect(await servedBy({ ignore: [P.atlasCheap] })).toBe(P.atlasDear)
    expect(await servedBy({ order: [P.atlasDear, P.atlasCheap] })).toBe(P.atlasDear)
    // The hold and the charge are the serving offer's: dear's prices.
    const res = await chat(m.url, m.key, ask({ only: [P.atlasDear] }))
    const body = await res.json()
    const u = body.usage
    const dear = (u.prompt_tokens * 200_000 + u.completion_tokens * 800_000) / 1e6
    expect(Number(body.svc.cost_usdc)).toBeCloseTo(Math.ceil(dear) / 1e6, 6)
  })

  it('falls back past `order` unless allow_fallbacks is false', async () => {
    m.sims.atlasDear.setFault({ kind: 'status-500' })
    try {
      expect(await servedBy({ order: [P.atlasDear] })).toBe(P.atlasCheap)
      const res = await chat(m.url, m.key, ask({ order: [P.atlasDear], allow_fallbacks: false }))
      await expectError(res, 503, 'no_capacity', null)
    } finally {
      m.sims.atlasDear.setFault({ kind: 'none' })
    }
  })

  it('keeps to offers within max_price, and refuses with no_capacity naming a preference that leaves none', async () => {
    // 0.15 and 0.6 USDC per Mtok is the cheap offer's price; the dear one's is above it.
    expect(await servedBy({ order: [P.atlasDear], max_price: { prompt: 0.15, completion: '0.6' } })).toBe(P.atlasCheap)
    for (const [provider, why] of [
      [{ max_price: { prompt: 0.1 } }, /provider\.max_price is below every offer/],
      [{ only: ['0x000000000000000000000000000000000000dead'] }, /provider\.only names none of its providers/],
      [{ ignore: [P.atlasCheap, P.atlasDear] }, /provider\.ignore leaves none/],
    ] as const) {
      const res = await chat(m.url, m.key, ask(provider))
      expect(res.headers.get('retry-after')).toBe('5')
      const e = await expectError(res, 503, 'no_capacity', null)
      expect(e.message).toMatch(why)
      expect(e.message).toContain('svc/atlas@1')
    }
    await expectError(
      await chat(m.url, m.key, ask({ max_price: { prompt: '1.2345678' } })),
      400,
      'feature_not_supported',
      'provider.max_price.prompt',
    )
    await expectError(await chat(m.url, m.key, ask({ sort: 'fastest' })), 400, 'feature_not_supported', 'provider.sort')
    await expectError(await chat(m.url, m.key, ask({ only: 'x' })), 400, 'feature_not_supported', 'provider.only')
  })

  it('sorts by measured latency and by measured throughput', async () => {
    m.sims.atlasCheap.setFault({ kind: 'slow', ms: 150 })
    try {
      // Both measured: each serves once.
      await servedBy({ only: [P.atlasCheap] })
      await servedBy({ only: [P.atlasDear] })
      expect(await servedBy({ sort: 'latency' })).toBe(P.atlasDear)
      expect(await servedBy({ sort: 'price' })).toBe(P.atlasCheap)
    } finally {
      m.sims.atlasCheap.setFault({ kind: 'none' })
    }
    await fetch(`${m.sims.atlasCheap.url.replace(/\/v1$/, '')}/_sim/settings`, {
      method: 'POST',
      body: JSON.stringify({ chunkDelayMs: 20 }),
    })
    try {
      const stream = (only: string) =>
        chat(m.url, m.key, ask({ only: [only] }, { stream: true, max_tokens: 12 })).then(sseEvents)
      for (let i = 0; i < 2; i++) {
        await stream(P.atlasCheap)
        await stream(P.atlasDear)
      }
      expect(await servedBy({ sort: 'throughput' })).toBe(P.atlasDear)
    } finally {
      m.sims.atlasCheap.settings.chunkDelayMs = 0
    }
  })

  it('applies to svc/cortex@1: the candidates and the vendor the preferences leave', async () => {
    const res = await chat(m.url, m.key, ask({ only: [P.tern] }, { model: 'svc/cortex@1' }))
    expect(res.status).toBe(200)
    const body = await res.json()
    expect(body.svc.provider).toBe(P.tern)
    expect(body.svc.routing).toMatchObject({ model: 'svc/tern@2', vendor_fallback: false })
  })
})
