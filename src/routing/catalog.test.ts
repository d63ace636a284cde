import { describe, expect, it } from 'vitest'
import { Catalog } from './catalog.js'
import type { Config } from '../config-schema.js'
import type { Provider } from '../providers/types.js'
import type { LiveOffer } from '../store/providers.js'

const config = {
  models: [
    {
      id: 'svc/m@1',
      owned_by: 'm',
      contextLimit: 1000,
      capabilities: {
        workload: 'chat',
        tools: false,
        structuredOutputs: false,
        reasoning: false,
        streaming: true,
        maxOutputTokens: 100,
      },
    },
  ],
  providers: [],
} as unknown as Config

const live = (baseUrl: string): LiveOffer => ({
  endpointId: `ep_${baseUrl}`,
  accountId: 7,
  address: '0x00000000000000000000000000000000000000a1',
  baseUrl,
  apiKey: null,
  bundle: 'b',
  profile: 'p',
  model: 'svc/m@1',
  upstreamModel: 'm',
  inputPrice: 1n,
  outputPrice: 1n,
  maxConcurrency: 1,
})

describe("the catalog's clients of store endpoints", () => {
  it('closes one no live offer has used for 15 minutes, and no sooner; one that comes back gets a new client', async () => {
    const made: { url: string; closed: boolean }[] = []
    const catalog = new Catalog(config, (url) => {
      const u = { url, closed: false }
      made.push(u)
      return { stream: () => (async function* () {})(), close: async () => void (u.closed = true) } as Provider
    })
    const t0 = 1_000_000
    catalog.applyLive([live('http://a/v1'), live('http://b/v1')], t0)
    expect(made.map((u) => u.url)).toEqual(['http://a/v1', 'http://b/v1'])
    catalog.applyLive([live('http://b/v1')], t0 + 1_000)
    catalog.applyLive([live('http://b/v1')], t0 + 15 * 60_000)
    expect(made[0]!.closed).toBe(false)
    catalog.applyLive([live('http://b/v1')], t0 + 1_000 + 15 * 60_000)
    expect(made.map((u) => u.closed)).toEqual([true, false])
    catalog.applyLive([live('http://a/v1'), live('http://b/v1')], t0 + 16 * 60_000)
    expect(made.map((u) => u.url)).toEqual(['http://a/v1', 'http://b/v1', 'http://a/v1'])
    expect(catalog.offers.get('svc/m@1')!.map((o) => o.upstream)).toHaveLength(1)
    await catalog.close()
    expect(made.every((u) => u.closed)).toBe(true)
  })
})
