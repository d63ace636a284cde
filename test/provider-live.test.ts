import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { SimulatedProvider } from '../src/providers/simulated/server.js'
import { chat, sseEvents, startMarket, type Market } from './helpers/market.js'
import { expectError, signIn, type PortalClient } from './helpers/portal.js'

const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }

/** A provider joins, reprices, pauses and withdraws while the gateway carries traffic, through the portal's API. */
describe('providers that join and leave while the gateway runs', () => {
  let m: Market
  let sim: SimulatedProvider
  let provider: PortalClient
  beforeAll(async () => {
    m = await startMarket({ tuning: { firstByteTimeoutMs: 3_000, replyTimeoutMs: 10_000 } })
    sim = await SimulatedProvider.start()
    provider = await signIn(m.url, privateKeyToAccount(generatePrivateKey()))
  })
  afterAll(async () => {
    await m?.close()
    await sim?.close()
  })

  /** Sends plain requests one after another until stopped; every status and serving provider. */
  function traffic() {
    const served: { status: number; provider?: string }[] = []
    let on = true
    const done = (async () => {
      while (on) {
        const res = await chat(m.url, m.key, body)
        const json = await res.json()
        served.push({ status: res.status, provider: json.svc?.provider })
      }
    })()
    return {
      served,
      stop: async () => {
        on = false
        await done
      },
    }
  }
  const lowest = async () =>
    (await (await fetch(`${m.url}/v1/models/svc/atlas@1`)).json()).svc.pricing?.input_price_per_mtok as string

  it('routes to a new, cheaper provider within 5 s, away from it when paused, with no failed request', async () => {
    const t = traffic()
    try {
      const added = await provider.call('POST', '/provider/endpoints', {
        base_url: sim.url,
        api_key: 'sk-new-provider',
        bundle: 'vllm-0.7',
        profile: 'sim',
      })
      expect(added.status).toBe(201)
      const endpoint = await added.json()
      expect(JSON.stringify(endpoint)).not.toContain('sk-new-provider')
      const offer = { model: 'svc/atlas@1', upstream_model: 'atlas', input_price_per_mtok: '0.1' }
      const set = await provider.call('POST', `/provider/endpoints/${endpoint.id}/offers`, {
        ...offer,
        output_price_per_mtok: '0.5',
      })
      expect(set.status, await set.clone().text()).toBe(200)
      const setAt = Date.now()
      await expect.poll(lowest, { timeout: 5_000, interval: 100 }).toBe('100000')
      await expect.poll(() => t.served.at(-1)?.provider, { timeout: 5_000, interval: 50 }).toBe(provider.address)
      expect(Date.now() - setAt).toBeLessThan(5_000)
      // The provider's key reached it, its prices charged.
      expect(sim.requests.length).toBeGreaterThan(0)
      const pause = { model: 'svc/atlas@1' }
      expect((await provider.call('POST', `/provider/endpoints/${endpoint.id}/offers/pause`, pause)).status).toBe(200)
      await expect.poll(lowest, { timeout: 5_000, interval: 100 }).toBe('150000')
      const paused = t.served.length
      await expect.poll(() => t.served.length, { timeout: 5_000 }).toBeGreaterThan(paused + 5)
      expect(t.served.at(-1)!.provider).not.toBe(provider.address)
    } finally {
      await t.stop()
    }
    expect(t.served.filter((s) => s.status !== 200)).toEqual([])
    expect(t.served.some((s) => s.provider === provider.address)).toBe(true)
  })

  it('lets a stream finish when its offer is withdrawn mid-way, charged and paid to the provider', async () => {
    const endpoint = (await (await provider.call('GET', '/provider/endpoints')).json()).data[0]
    const resume = { model: 'svc/atlas@1' }
    expect((await provider.call('POST', `/provider/endpoints/${endpoint.id}/offers/resume`, resume)).status).toBe(200)
    await expect.poll(lowest, { timeout: 5_000, interval: 100 }).toBe('100000')
    sim.settings.chunkDelayMs = 40
    const before = await m.store.settlement.payeeTotals((await m.store.accounts.byAddress(provider.address))!.id)
    const res = await chat(m.url, m.key, { ...body, stream: true, max_tokens: 20 })
    const reading = sseEvents(res)
    await new Promise((resolve) => setTimeout(resolve, 150))
    expect((await provider.call('DELETE', `/provider/endpoints/${endpoint.id}`)).status).toBe(200)
    const events = await reading
    sim.settings.chunkDelayMs = 0
    const svc = JSON.parse(events.find((e) => e.includes('"svc"'))!).svc
    expect(svc.provider).toBe(provider.address)
    expect(Number(svc.cost_usdc)).toBeGreaterThan(0)
    const after = await m.store.settlement.payeeTotals((await m.store.accounts.byAddress(provider.address))!.id)
    expect(after.pending).toBeGreaterThan(before.pending)
    await expect.poll(lowest, { timeout: 5_000, interval: 100 }).toBe('150000')
  })

  it('refuses an offer whose endpoint fails its probe, saying why', async () => {
    const broken = await SimulatedProvider.start()
    broken.setFault({ kind: 'status-500' })
    try {
      const endpoint = await (
        await provider.call('POST', '/provider/endpoints', { base_url: broken.url, bundle: 'x', profile: 'y' })
      ).json()
      const res = await provider.call('POST', `/provider/endpoints/${endpoint.id}/offers`, {
        model: 'svc/atlas@1',
        input_price_per_mtok: '0.01',
        output_price_per_mtok: '0.01',
      })
      await expectError(res, 400, 'feature_not_supported', /failed its probe for svc\/atlas@1: it did not answer/)
      const unknown = await provider.call('POST', `/provider/endpoints/${endpoint.id}/offers`, {
        model: 'svc/nope@1',
        input_price_per_mtok: '0.01',
        output_price_per_mtok: '0.01',
      })
      await expectError(unknown, 400, 'feature_not_supported', /no model svc\/nope@1/)
      const bad = await provider.call('POST', '/provider/endpoints', { base_url: 'ftp://x', bundle: 'x', profile: 'y' })
      await expectError(bad, 400, 'feature_not_supported', /base_url must be an http\(s\) URL/)
    } finally {
      await broken.close()
    }
  })
})
