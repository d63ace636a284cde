import { describe, expect, it } from 'vitest'
import { chat, P, sseEvents, marketPerTest } from './helpers/market.js'
import { documentTool, expectUnchanged, parseChunks, snapshot, TIME, WEATHER, WEATHER_ARGS } from './helpers/tools.js'
import type { Fault } from '../src/providers/simulated/faults.js'

const market = marketPerTest()

const body = (extra: Record<string, unknown> = {}) => ({
  model: 'svc/atlas@1',
  messages: [{ role: 'user', content: 'Use get_weather' }],
  tools: [WEATHER, TIME],
  max_tokens: 100,
  ...extra,
})
const FAULTS: Fault[] = [{ kind: 'bad-tool-args' }, { kind: 'empty-tool-name' }]

describe('an invalid call before any content reached the client', () => {
  it.each(FAULTS.flatMap((f) => [false, true].map((stream) => [f.kind, stream, f] as const)))(
    '%s → the next offer serves (stream %s)',
    async (_kind, stream, fault) => {
      const mk = await market()
      mk.sims.atlasCheap.setFault(fault)
      mk.sims.atlasCheap.settings.fragmentation = 'bytes'
      const res = await chat(mk.url, mk.key, body({ stream }))
      expect(res.status).toBe(200)
      if (stream) {
        const chunks = parseChunks(await sseEvents(res))
        expect(chunks.some((c) => c.error)).toBe(false)
        const calls = chunks.flatMap(
          (c) => (c.choices[0]?.delta.tool_calls as { function: { arguments: string } }[] | undefined) ?? [],
        )
        expect(calls.map((c) => c.function.arguments)).toEqual([WEATHER_ARGS])
        expect(chunks.at(-1)!.svc!.provider).toBe(P.atlasDear)
      } else {
        const r = await res.json()
        expect(r.choices[0].message.tool_calls[0].function.arguments).toBe(WEATHER_ARGS)
        expect(r.svc.provider).toBe(P.atlasDear)
      }
      expect(mk.sims.atlasCheap.stats.requests).toBe(1)
      const usage = await mk.store.usage.list(mk.accountId, { limit: 1 })
      expect(usage[0]).toMatchObject({ outcome: 'completed', provider: P.atlasDear })
    },
  )
})

describe('every offer answers with invalid calls', () => {
  it.each(FAULTS.flatMap((f) => [false, true].map((stream) => [f.kind, stream, f] as const)))(
    '%s → 502 provider_output_invalid with Retry-After, nothing charged (stream %s)',
    async (_kind, stream, fault) => {
      const mk = await market()
      mk.sims.atlasCheap.setFault(fault)
      mk.sims.atlasDear.setFault(fault)
      const before = await snapshot(mk)
      const res = await chat(mk.url, mk.key, body({ stream }))
      expect(res.status).toBe(502)
      expect(res.headers.get('retry-after')).toBe('1')
      const { error } = await res.json()
      expect(error).toMatchObject({ type: 'api_error', code: 'provider_output_invalid', param: null })
      expect(error.message).toMatch(/Nothing was charged/)
      expect(mk.sims.atlasCheap.stats.requests + mk.sims.atlasDear.stats.requests).toBe(2)
      // Never substituted by another model.
      expect(mk.sims.tern.stats.requests + mk.sims.vendor.stats.requests).toBe(0)
      await expectUnchanged(mk, before)
      const usage = await mk.store.usage.list(mk.accountId, { limit: 1 })
      expect(usage[0]).toMatchObject({ outcome: 'provider_output_invalid', cost: 0n })
    },
  )

  it('says to retry when the breakers its failures opened half-open', async () => {
    const mk = await market({ tuning: { breakerFailures: 1, breakerCooldownMs: 4_000 } })
    mk.sims.atlasCheap.setFault(FAULTS[0]!)
    mk.sims.atlasDear.setFault(FAULTS[0]!)
    const res = await chat(mk.url, mk.key, body())
    expect(res.status).toBe(502)
    expect((await res.json()).error.code).toBe('provider_output_invalid')
    // Retrying after 1 s would only meet the open breakers (and a 503): the client is told when they half-open.
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(3)
    expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(4)
  })

  it('arguments beyond max_argument_bytes are refused like malformed ones', async () => {
    const mk = await market()
    const before = await snapshot(mk)
    // FULL_CONTRACT certifies 4096 bytes: 4096 passes, 4097 is refused on both offers.
    const ok = await chat(mk.url, mk.key, body({ tools: [documentTool(4096)] }))
    expect(ok.status).toBe(200)
    expect(Buffer.byteLength((await ok.json()).choices[0].message.tool_calls[0].function.arguments)).toBe(4096)
    const afterOk = await snapshot(mk)
    expect(afterOk.balance).toBeLessThan(before.balance)
    const res = await chat(mk.url, mk.key, body({ tools: [documentTool(4097)] }))
    expect(res.status).toBe(502)
    expect((await res.json()).error.message).toMatch(/exceed 4096 bytes/)
    await expectUnchanged(mk, afterOk)
  })
})

describe('an upstream that ignores tool_choice', () => {
  // Honours only auto and ignores other tool_choice values, as some servers do silently (upstream names atlas,
  // atlas-b).
  const only = { toolChoice: ['auto' as const], toolChoiceUnsupported: 'ignore' as const }
  const ignoring = { atlas: only, 'atlas-b': only }

  it.each<[string, Record<string, unknown>, string]>([
    ['none', { tool_choice: 'none' }, 'although tool_choice is none'],
    [
      'named',
      { tool_choice: { type: 'function', function: { name: 'get_time' } } },
      'although tool_choice names "get_time"',
    ],
  ])('tool_choice %s ignored → refused, the next offer serves what was asked', async (_mode, extra, why) => {
    const mk = await market()
    mk.sims.atlasCheap.settings.models = ignoring
    const r = await (await chat(mk.url, mk.key, body(extra))).json()
    expect(r.svc.provider).toBe(P.atlasDear)
    if (extra.tool_choice === 'none') expect(r.choices[0].message.tool_calls).toBeUndefined()
    else
      expect(r.choices[0].message.tool_calls.map((c: { function: { name: string } }) => c.function.name)).toEqual([
        'get_time',
      ])
    mk.sims.atlasDear.settings.models = ignoring
    const res = await chat(mk.url, mk.key, body(extra))
    expect(res.status).toBe(502)
    expect((await res.json()).error.message).toContain(why)
  })
})

describe('an invalid call after content was streamed', () => {
  it('ends the stream with a provider_output_invalid chunk and [DONE], charging nothing', async () => {
    const mk = await market()
    mk.sims.atlasCheap.settings.toolPreface = 'Let me look that up.'
    mk.sims.atlasCheap.setFault({ kind: 'bad-tool-args' })
    const before = await snapshot(mk)
    const res = await chat(mk.url, mk.key, body({ stream: true }))
    expect(res.status).toBe(200)
    const chunks = parseChunks(await sseEvents(res))
    expect(chunks).toHaveLength(3)
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant', content: '' })
    expect(chunks[1]!.choices[0]!.delta).toEqual({ content: 'Let me look that up.' })
    expect(chunks[2]!.choices).toEqual([])
    expect(chunks[2]!.error).toMatchObject({ type: 'api_error', code: 'provider_output_invalid' })
    expect(chunks[2]!.error!.message).toMatch(/Nothing was charged/)
    // Committed to the first offer: no failover once content went out.
    expect(mk.sims.atlasDear.stats.requests).toBe(0)
    await expectUnchanged(mk, before)
    const usage = await mk.store.usage.list(mk.accountId, { limit: 1 })
    expect(usage[0]).toMatchObject({ outcome: 'provider_output_invalid', cost: 0n, provider: P.atlasCheap })
  })
})

describe('health', () => {
  it('a provider that keeps sending invalid calls opens its breaker and is no longer tried', async () => {
    const mk = await market({ tuning: { breakerFailures: 3, breakerCooldownMs: 60_000 } })
    mk.sims.atlasCheap.setFault({ kind: 'bad-tool-args' })
    const key = `${P.atlasCheap}|svc/atlas@1`
    for (let i = 0; i < 3; i++) {
      expect(mk.server.gateway.health.breaker(key)).toBe('closed')
      expect((await (await chat(mk.url, mk.key, body())).json()).svc.provider).toBe(P.atlasDear)
    }
    expect(mk.server.gateway.health.breaker(key)).toBe('open')
    expect(mk.sims.atlasCheap.stats.requests).toBe(3)
    expect(await (await chat(mk.url, mk.key, body({ stream: true }))).text()).toContain(P.atlasDear)
    expect(mk.sims.atlasCheap.stats.requests).toBe(3)
    // The model list now prices atlas at its live offer only.
    const models = await (await fetch(`${mk.url}/v1/models`)).json()
    expect(models.data.find((x: { id: string }) => x.id === 'svc/atlas@1').svc.pricing.input_price_per_mtok).toBe(
      '200000',
    )
  })

  it('an invalid call after content counts as a failure too', async () => {
    const mk = await market({ tuning: { breakerFailures: 2, breakerCooldownMs: 60_000 } })
    mk.sims.atlasCheap.settings.toolPreface = 'Checking.'
    mk.sims.atlasCheap.setFault({ kind: 'empty-tool-name' })
    for (let i = 0; i < 2; i++)
      expect(await (await chat(mk.url, mk.key, body({ stream: true }))).text()).toContain('provider_output_invalid')
    expect(mk.server.gateway.health.breaker(`${P.atlasCheap}|svc/atlas@1`)).toBe('open')
  })
})
