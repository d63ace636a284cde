import { describe, expect, it } from 'vitest'
import type { Config } from '../src/config-schema.js'
import { countedByTurn } from './helpers/turns.js'
import { chat, P, marketPerTest } from './helpers/market.js'
import { send } from './helpers/cortex.js'
import { parseUsdc, priceOf } from '../src/money/usdc.js'

const market = marketPerTest()

const LONG = [{ role: 'user', content: 'word '.repeat(380) }]
const VENDOR_PRICES = { input: 3_000_000n, output: 15_000_000n }
const sentMax = (sim: { requests: Record<string, unknown>[] }) => sim.requests.at(-1)?.max_tokens

describe.each([false, true])('svc/cortex@1 without max_tokens: a bound per candidate (stream %s)', (stream) => {
  it('serves from a candidate whose context leaves less than the others’ bound, sent and billed its own', async () => {
    // Upstreams that write 300 words whatever max_tokens says: the charge must stop at the bound the server was sent.
    const mk = await market({ sim: { replyTokens: 300, ignoreMaxTokens: true } })
    for (const s of [mk.sims.atlasCheap, mk.sims.atlasDear, mk.sims.tern]) s.setFault({ kind: 'status-500' })
    const r = await send(mk, stream, { max_tokens: undefined, messages: LONG })
    const room = 512 - r.usage.prompt_tokens
    expect(room).toBeGreaterThan(0)
    expect(room).toBeLessThan(256)
    // Not the vendor at about a hundred times the price.
    expect(r.svc.routing).toEqual({
      model: 'svc/wren@1',
      served_by: P.wren,
      vendor_fallback: false,
      status: 'failover:2',
    })
    expect(mk.sims.vendor.stats.requests).toBe(0)
    // Each candidate tried was told its own bound: the listed cortex maximum, or what its context leaves when less.
    expect(sentMax(mk.sims.atlasCheap)).toBe(256)
    expect(sentMax(mk.sims.atlasDear)).toBe(256)
    expect(sentMax(mk.sims.tern)).toBe(256)
    expect(sentMax(mk.sims.wren)).toBe(room)
    // Billed up to wren's bound at wren's price, not up to the hold's larger bound.
    expect(r.usage.completion_tokens).toBe(room)
    expect(parseUsdc(r.svc.cost_usdc)).toBe(priceOf({ input: 50_000n, output: 100_000n }, r.usage.prompt_tokens, room))
    expect((await mk.store.accounts.byId(mk.accountId))!.held).toBe(0n)
  })

  it('gives the first candidate the listed cortex maximum, not the room a smaller candidate has', async () => {
    const mk = await market({ sim: { replyTokens: 300 } })
    const r = await send(mk, stream, { max_tokens: undefined, messages: LONG })
    expect(r.svc.routing).toEqual({
      model: 'svc/atlas@1',
      served_by: P.atlasCheap,
      vendor_fallback: false,
      status: 'available',
    })
    expect(sentMax(mk.sims.atlasCheap)).toBe(256)
    // The whole bound, longer than wren's room.
    expect(r.usage.completion_tokens).toBe(256)
    expect(parseUsdc(r.svc.cost_usdc)).toBe(
      priceOf({ input: 150_000n, output: 600_000n }, r.usage.prompt_tokens, r.usage.completion_tokens),
    )
  })
})

describe('svc/cortex@1 bounds and the hold', () => {
  it('without max_tokens, tries a candidate whose context leaves less than the bound after those that give it whole', async () => {
    const mk = await market({ edit: (c) => void (c.cortex = { candidates: ['svc/wren@1', 'svc/atlas@1'] }) })
    const r = await send(mk, false, { max_tokens: undefined, messages: LONG })
    // wren is preferred, but after this prompt its context leaves it less than 256 tokens: atlas answers in full.
    expect(r.svc.routing).toEqual({
      model: 'svc/atlas@1',
      served_by: P.atlasCheap,
      vendor_fallback: false,
      status: 'available',
    })
    expect(mk.sims.wren.stats.requests).toBe(0)
    expect(sentMax(mk.sims.atlasCheap)).toBe(256)
    // With atlas down, wren still answers before the vendor, with what its context leaves.
    for (const s of [mk.sims.atlasCheap, mk.sims.atlasDear]) s.setFault({ kind: 'status-500' })
    const cut = await send(mk, false, { max_tokens: undefined, messages: LONG })
    expect(cut.svc.routing).toEqual({
      model: 'svc/wren@1',
      served_by: P.wren,
      vendor_fallback: false,
      status: 'failover:1',
    })
    expect(sentMax(mk.sims.wren)).toBe(512 - cut.usage.prompt_tokens)
  })

  it('without max_tokens, holds the ceiling prices for the largest bound of the plan', async () => {
    // Slow enough that the hold is still there when the poll reads it on a busy machine, within the reply budget.
    const mk = await market({ tuning: { replyTimeoutMs: 10_000 } })
    mk.sims.atlasCheap.setFault({ kind: 'slow', ms: 1_500 })
    const pending = chat(mk.url, mk.key, { model: 'svc/cortex@1', messages: LONG })
    await expect.poll(async () => (await mk.store.accounts.byId(mk.accountId))!.held).toBeGreaterThan(0n)
    const held = (await mk.store.accounts.byId(mk.accountId))!.held
    const r = await (await pending).json()
    expect(r.svc.routing.model).toBe('svc/atlas@1')
    // The largest bound (the listed cortex maximum) at the vendor's prices: whichever target serves, its charge is
    // covered.
    expect(held).toBe(priceOf(VENDOR_PRICES, r.usage.prompt_tokens, 256))
  })

  it('without max_tokens, tells the vendor the listed cortex maximum', async () => {
    const mk = await market()
    for (const s of [mk.sims.atlasCheap, mk.sims.atlasDear, mk.sims.tern, mk.sims.wren])
      s.setFault({ kind: 'status-500' })
    const r = await send(mk, false, { max_tokens: undefined, messages: LONG })
    expect(r.svc.routing).toMatchObject({ model: 'vendor-large', status: 'managed:no_capacity' })
    expect(sentMax(mk.sims.wren)).toBe(512 - r.usage.prompt_tokens)
    expect(sentMax(mk.sims.vendor)).toBe(256)
  })

  it('with max_tokens, sends every target that bound and drops a candidate that cannot carry it', async () => {
    const mk = await market()
    for (const s of [mk.sims.atlasCheap, mk.sims.atlasDear, mk.sims.tern]) s.setFault({ kind: 'status-500' })
    // 200 tokens do not fit in what wren's context leaves after this prompt.
    const r = await send(mk, false, { max_tokens: 200, messages: LONG })
    expect(r.svc.routing).toEqual({
      model: 'vendor-large',
      served_by: 'managed',
      vendor_fallback: true,
      status: 'managed:no_capacity',
    })
    expect(mk.sims.wren.stats.requests).toBe(0)
    for (const s of [mk.sims.atlasCheap, mk.sims.atlasDear, mk.sims.tern, mk.sims.vendor]) expect(sentMax(s)).toBe(200)
  })
})

describe('the managed vendor’s context (managed.contextLimit)', () => {
  const VENDOR_CONTEXT = 40_000
  const withContext = { edit: (c: Config) => void (c.managed!.contextLimit = VENDOR_CONTEXT) }
  /** A prompt of about `tokens` tokens: too long for every candidate (32,768 at most) when above that. */
  const prompt = (tokens: number) => [{ role: 'user', content: 'hello '.repeat(tokens - 8) }]

  it('sends the vendor a prompt its context takes, bounded by the room it leaves', async () => {
    const mk = await market(withContext)
    const r = await send(mk, false, { max_tokens: undefined, messages: prompt(39_900) })
    expect(r.svc.routing).toMatchObject({ model: 'vendor-large', status: 'managed:no_candidate' })
    expect(r.usage.prompt_tokens).toBeGreaterThan(39_744)
    // The listed cortex maximum (256) does not fit after this prompt: the vendor is told what its context leaves.
    expect(sentMax(mk.sims.vendor)).toBe(VENDOR_CONTEXT - r.usage.prompt_tokens)
    expect(r.usage.completion_tokens).toBeLessThanOrEqual(VENDOR_CONTEXT - r.usage.prompt_tokens)
  })

  it('refuses what the vendor’s context cannot take as the client error it is, sending nothing', async () => {
    const mk = await market(withContext)
    const tooLong = await chat(mk.url, mk.key, { model: 'svc/cortex@1', messages: prompt(41_000) })
    expect(tooLong.status).toBe(400)
    expect((await tooLong.json()).error).toMatchObject({
      code: 'feature_not_supported',
      param: 'messages',
      message: expect.stringContaining(
        `context window of the managed vendor of svc/cortex@1 (${VENDOR_CONTEXT} tokens)`,
      ),
    })
    const noRoom = await chat(mk.url, mk.key, { model: 'svc/cortex@1', messages: prompt(39_900), max_tokens: 200 })
    expect(noRoom.status).toBe(400)
    expect((await noRoom.json()).error).toMatchObject({ code: 'feature_not_supported', param: 'max_tokens' })
    expect(mk.sims.vendor.stats.requests).toBe(0)
    expect((await mk.store.accounts.byId(mk.accountId))!.held).toBe(0n)
  })

  it('counts a prompt no further than the vendor’s context', async () => {
    const mk = await market(withContext)
    let x = 3
    const letters = Array.from({ length: 2_000_000 }, () =>
      String.fromCharCode(97 + (((x = (x * 1103515245 + 12345) >>> 0) >>> 16) % 26)),
    ).join('')
    const { result: res, perTurn } = await countedByTurn(() =>
      chat(mk.url, mk.key, { model: 'svc/cortex@1', messages: [{ role: 'user', content: letters }] }),
    )
    expect(res.status).toBe(400)
    expect((await res.json()).error.message).toContain(`the managed vendor of svc/cortex@1 (${VENDOR_CONTEXT} tokens)`)
    // 40,000 tokens of such letters are about 80,000 of the 2,000,000 characters.
    expect(perTurn.reduce((a, b) => a + b, 0)).toBeLessThan(200_000)
  })
})
