import { describe, expect, it } from 'vitest'
import { chat, P, marketPerTest } from './helpers/market.js'
import { ask, send } from './helpers/cortex.js'
import { maxCostFor } from './helpers/money.js'
import { parseUsdc, priceOf, splitFee } from '../src/money/usdc.js'
import { SYSTEM_ACCOUNTS } from '../src/store/accounts.js'

const market = marketPerTest()

describe.each([false, true])('svc/cortex@1 (stream %s)', (stream) => {
  it('available: the first candidate answers', async () => {
    const mk = await market()
    const r = await send(mk, stream)
    expect(r.model).toBe('svc/cortex@1')
    expect(r.fingerprint).toBe('cortex:svc/atlas@1')
    expect(r.svc.provider).toBe(P.atlasCheap)
    expect(r.svc.routing).toEqual({
      model: 'svc/atlas@1',
      served_by: P.atlasCheap,
      vendor_fallback: false,
      status: 'available',
    })
    // Charged the served offer's price, not the ceiling.
    expect(parseUsdc(r.svc.cost_usdc)).toBe(
      priceOf({ input: 150_000n, output: 600_000n }, r.usage.prompt_tokens, r.usage.completion_tokens),
    )
  })

  it('failover:1: the first candidate’s providers are down', async () => {
    const mk = await market()
    mk.sims.atlasCheap.setFault({ kind: 'status-500' })
    mk.sims.atlasDear.setFault({ kind: 'refuse-connections' })
    const r = await send(mk, stream)
    expect(r.fingerprint).toBe('cortex:svc/tern@2')
    expect(r.svc.routing).toEqual({
      model: 'svc/tern@2',
      served_by: P.tern,
      vendor_fallback: false,
      status: 'failover:1',
    })
    expect(parseUsdc(r.svc.cost_usdc)).toBe(
      priceOf({ input: 100_000n, output: 400_000n }, r.usage.prompt_tokens, r.usage.completion_tokens),
    )
  })

  it('failover:1: the first candidate returns invalid tool calls', async () => {
    const mk = await market({ edit: (c) => void (c.cortex = { candidates: ['svc/atlas@1', 'svc/tern@2'] }) })
    mk.sims.atlasCheap.setFault({ kind: 'bad-tool-args' })
    mk.sims.atlasDear.setFault({ kind: 'empty-tool-name' })
    const tools = [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      },
    ]
    const r = await send(mk, stream, { tools })
    expect(r.svc.routing).toMatchObject({ model: 'svc/tern@2', status: 'failover:1' })
  })

  it('failover:2: two candidates down', async () => {
    const mk = await market()
    mk.sims.atlasCheap.setFault({ kind: 'status-500' })
    mk.sims.atlasDear.setFault({ kind: 'status-429' })
    mk.sims.tern.setFault({ kind: 'slow', ms: 5_000 })
    const r = await send(mk, stream)
    expect(r.svc.routing).toEqual({
      model: 'svc/wren@1',
      served_by: P.wren,
      vendor_fallback: false,
      status: 'failover:2',
    })
    expect(r.fingerprint).toBe('cortex:svc/wren@1')
  })

  it('managed:no_capacity: every candidate down, the vendor answers', async () => {
    const mk = await market()
    for (const s of [mk.sims.atlasCheap, mk.sims.atlasDear, mk.sims.tern, mk.sims.wren])
      s.setFault({ kind: 'status-500' })
    const vendorBefore = await mk.store.accounts.books((await mk.store.accounts.byAddress(SYSTEM_ACCOUNTS.vendor))!.id)
    const r = await send(mk, stream)
    expect(r.svc.provider).toBe('managed')
    expect(r.fingerprint).toBe('cortex:vendor-large')
    expect(r.svc.routing).toEqual({
      model: 'vendor-large',
      served_by: 'managed',
      vendor_fallback: true,
      status: 'managed:no_capacity',
    })
    const cost = parseUsdc(r.svc.cost_usdc)!
    expect(cost).toBe(
      priceOf({ input: 3_000_000n, output: 15_000_000n }, r.usage.prompt_tokens, r.usage.completion_tokens),
    )
    // The vendor's cost goes to the marketplace's vendor account, whole.
    const vendorAfter = await mk.store.accounts.books((await mk.store.accounts.byAddress(SYSTEM_ACCOUNTS.vendor))!.id)
    expect(vendorAfter.pending - vendorBefore.pending).toBe(cost)
    expect(mk.sims.vendor.requests.at(-1)).toMatchObject({ model: 'vendor-large' })
  })

  it('managed:provider_output_invalid: candidates answer with output the gateway refuses', async () => {
    const mk = await market()
    for (const s of [mk.sims.atlasCheap, mk.sims.atlasDear, mk.sims.tern]) s.setFault({ kind: 'garbage' })
    mk.sims.wren.setFault({ kind: 'status-500' })
    const r = await send(mk, stream)
    expect(r.svc.routing).toEqual({
      model: 'vendor-large',
      served_by: 'managed',
      vendor_fallback: true,
      status: 'managed:provider_output_invalid',
    })
  })

  it('managed:no_candidate: no candidate fits the request', async () => {
    const mk = await market()
    // max_tokens above every candidate's maxOutputTokens (4096 at most), but the vendor takes it.
    const r = await send(mk, stream, { max_tokens: 5000 })
    expect(r.svc.routing).toEqual({
      model: 'vendor-large',
      served_by: 'managed',
      vendor_fallback: true,
      status: 'managed:no_candidate',
    })
    expect(mk.sims.atlasCheap.stats.requests + mk.sims.tern.stats.requests + mk.sims.wren.stats.requests).toBe(0)
  })

  it('answers 503 no_capacity with Retry-After when the vendor fails too, charging nothing', async () => {
    const mk = await market()
    for (const s of Object.values(mk.sims)) s.setFault({ kind: 'status-500' })
    const before = (await mk.store.accounts.byId(mk.accountId))!
    const res = await chat(mk.url, mk.key, ask({ stream }))
    expect(res.status).toBe(503)
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect((await res.json()).error.code).toBe('no_capacity')
    const after = (await mk.store.accounts.byId(mk.accountId))!
    expect(after.balance).toBe(before.balance)
    expect(after.held).toBe(0n)
  })
})

describe('cortex Retry-After', () => {
  it('counts only the candidates that fit the request: one that cannot take it does not make a retry look useful', async () => {
    const mk = await market({ tuning: { breakerFailures: 1, breakerCooldownMs: 4_000 } })
    for (const s of [mk.sims.atlasCheap, mk.sims.atlasDear, mk.sims.tern, mk.sims.vendor])
      s.setFault({ kind: 'status-500' })
    // wren takes no tools, so no request with tools can go to it, whatever its breaker says.
    const withTools = ask({
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }],
    })
    expect((await chat(mk.url, mk.key, withTools)).status).toBe(503)
    const res = await chat(mk.url, mk.key, withTools)
    expect(res.status).toBe(503)
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(3)
    expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(4)
    expect(mk.sims.wren.stats.requests).toBe(0)
    // A request wren can take may be retried at once.
    expect((await chat(mk.url, mk.key, ask())).status).toBe(200)
  })
})

describe('cortex money', () => {
  it('holds at the ceiling (vendor included) and captures the served price', async () => {
    // Slow enough that the hold is still there when the poll reads it on a busy machine, within the reply budget.
    const mk = await market({ tuning: { replyTimeoutMs: 10_000 } })
    mk.sims.atlasCheap.setFault({ kind: 'slow', ms: 1_500 })
    const body = ask()
    const ceiling = maxCostFor(mk.config, body)
    // The vendor's prices make the cortex hold larger than the same request's hold on the named model.
    expect(ceiling).toBeGreaterThan(maxCostFor(mk.config, { ...body, model: 'svc/atlas@1' }))
    const before = (await mk.store.accounts.byId(mk.accountId))!
    const pending = chat(mk.url, mk.key, body)
    await expect.poll(async () => (await mk.store.accounts.byId(mk.accountId))!.held).toBe(ceiling)
    const r = await (await pending).json()
    const cost = parseUsdc(r.svc.cost_usdc)!
    expect(cost).toBeLessThan(ceiling)
    const after = (await mk.store.accounts.byId(mk.accountId))!
    expect(before.balance - after.balance).toBe(cost)
    const provider = (await mk.store.accounts.byAddress(P.atlasCheap))!
    expect((await mk.store.accounts.books(provider.id)).pending).toBe(splitFee(cost, 500).payout)
  })

  it('refuses with 402 when the balance covers the served price but not the ceiling', async () => {
    const mk = await market({ funds: 100n })
    const res = await chat(mk.url, mk.key, ask())
    expect(res.status).toBe(402)
    expect(res.headers.get('x-request-id')).toBeTruthy()
    // The same request to the named model fits.
    expect((await chat(mk.url, mk.key, { ...ask(), model: 'svc/atlas@1' })).status).toBe(200)
  })
})

/**
 * A prompt of about 380 tokens: wren's 512-token context leaves it about 130 for the reply, under the 256 listed for
 * cortex.
 */
