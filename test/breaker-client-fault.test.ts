import { describe, expect, it } from 'vitest'
import { chat, marketPerTest } from './helpers/market.js'

const market = marketPerTest()

const hello = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hello' }], max_tokens: 20 }
const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }]

describe('upstreams refusing one client request with 400', () => {
  it('do not open their breakers for everyone else', async () => {
    // Both atlas upstreams refuse tool_choice "required" with 400, as some servers do for input they reject.
    const refuseRequired = { toolChoice: ['auto', 'none', 'named'] as const, toolChoiceUnsupported: 'refuse' as const }
    const mk = await market({
      sim: {
        models: {
          atlas: { ...refuseRequired, toolChoice: [...refuseRequired.toolChoice] },
          'atlas-b': { ...refuseRequired, toolChoice: [...refuseRequired.toolChoice] },
        },
      },
    })
    const breakerFailures = 3
    for (let i = 0; i < breakerFailures + 1; i++) {
      const res = await chat(mk.url, mk.key, { ...hello, tools, tool_choice: 'required' })
      // The client is told it is its request (no retry would fare better), not that no provider has room.
      expect(res.status).toBe(400)
      expect(res.headers.get('retry-after')).toBeNull()
      const { error } = await res.json()
      expect(error).toMatchObject({ code: 'feature_not_supported', param: null })
      expect(error.message).toMatch(
        /^Every provider of svc\/atlas@1 tried \(2\) refused the request as invalid \(upstream answered 400/,
      )
    }
    expect(mk.sims.atlasCheap.stats.requests).toBe(breakerFailures + 1)
    // Another client's ordinary request is still served.
    const res = await chat(mk.url, mk.key, hello)
    expect(res.status, await res.clone().text()).toBe(200)
    expect(mk.server.gateway.health.breaker(`${(await res.json()).svc.provider}|svc/atlas@1`)).toBe('closed')
  })

  it('are a 503 to retry, not a 400, while another offer that might take it is only busy', async () => {
    // Only the cheap atlas refuses a required tool choice; the dear one takes it, one request at a time.
    const mk = await market({
      sim: { models: { atlas: { toolChoice: ['auto', 'none', 'named'], toolChoiceUnsupported: 'refuse' } } },
      edit: (c) => (c.providers.find((p) => p.offers[0]!.upstreamModel === 'atlas-b')!.offers[0]!.maxConcurrency = 1),
      tuning: { firstByteTimeoutMs: 10_000, replyTimeoutMs: 10_000 },
    })
    mk.sims.atlasDear.setFault({ kind: 'stall' })
    const required = { ...hello, tools, tool_choice: 'required' }
    const first = chat(mk.url, mk.key, required)
    await expect.poll(() => mk.sims.atlasDear.stats.active).toBe(1)
    // The dear offer is serving the first: the second is refused by the cheap one and finds the dear one busy.
    const second = await chat(mk.url, mk.key, required)
    expect(second.status).toBe(503)
    expect(second.headers.get('retry-after')).not.toBeNull()
    expect((await second.json()).error.code).toBe('no_capacity')
    mk.sims.atlasDear.setFault({ kind: 'none' })
    expect((await first).status).toBe(200)
    expect((await chat(mk.url, mk.key, required)).status).toBe(200)
  })
})
