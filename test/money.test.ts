import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import { chat, P, sseEvents, startMarket, type Market } from './helpers/market.js'
import { checkInvariants, maxCostFor } from './helpers/money.js'
import { STORE_KINDS, freshPostgresUrl, postgresReachable } from './helpers/stores.js'
import { parseUsdc, formatUsdc } from '../src/money/usdc.js'
import { SYSTEM_ACCOUNTS } from '../src/store/accounts.js'
import { issueKey, openAccount, depositTo } from '../src/accounts/operations.js'
import { addressOf } from './helpers/market.js'

const FUNDS = 1_000_000n

describe.each(STORE_KINDS)('money on %s', (kind) => {
  let m: Market
  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    // A reply budget beyond the slowed request below, so it is served where it was held and not failed over under load.
    m = await startMarket({ store: kind, funds: FUNDS, tuning: { replyTimeoutMs: 10_000 } })
  })
  afterAll(() => m?.close())

  const body = {
    model: 'svc/atlas@1',
    messages: [{ role: 'user', content: 'How much does this cost?' }],
    max_tokens: 30,
  }

  it('captures exactly cost_usdc, credits the provider cost − fee and the marketplace the fee', async () => {
    const provider = (await m.store.accounts.byAddress(P.atlasCheap))!
    const fees = (await m.store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!
    const before = {
      user: (await m.store.accounts.byId(m.accountId))!,
      p: await m.store.accounts.books(provider.id),
      f: await m.store.accounts.books(fees.id),
    }
    const plain = await (await chat(m.url, m.key, body)).json()
    const events = await sseEvents(await chat(m.url, m.key, { ...body, stream: true }))
    const streamed = JSON.parse(events.at(-2)!).svc
    const costs = [parseUsdc(plain.svc.cost_usdc)!, parseUsdc(streamed.cost_usdc)!]
    const total = costs[0]! + costs[1]!
    const after = (await m.store.accounts.byId(m.accountId))!
    expect(before.user.balance - after.balance).toBe(total)
    expect(before.user.cap - after.cap).toBe(total)
    expect(after.held).toBe(0n)
    const fee = costs.reduce((s, c) => s + (c * 500n) / 10_000n, 0n)
    expect((await m.store.accounts.books(provider.id)).pending - before.p.pending).toBe(total - fee)
    expect((await m.store.accounts.books(fees.id)).pending - before.f.pending).toBe(fee)
    const record = (await m.store.usage.get(m.accountId, plain.svc.request_id))!
    expect(record).toMatchObject({
      cost: costs[0],
      outcome: 'completed',
      provider: P.atlasCheap,
      servedModel: 'svc/atlas@1',
      promptTokens: plain.usage.prompt_tokens,
      completionTokens: plain.usage.completion_tokens,
    })
    expect(record.upstreamCompletionTokens).toBe(12)
    await checkInvariants(m.store, m.accountId, FUNDS)
  })

  it('refuses with 402 insufficient_quota, explains the figures and charges nothing', async () => {
    const { account } = await openAccount(m.store, addressOf(0x99), Date.now())
    await depositTo(m.store, account.id, 5n, Date.now())
    await m.store.accounts.approve(account.id, 10n)
    const { key } = await issueKey({ now: Date.now(), store: m.store, accountId: account.id, name: 'poor' })
    const client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: key, maxRetries: 0 })
    const err = await client.chat.completions.create(body as never).catch((e) => e)
    expect(err.status).toBe(402)
    expect(err.code).toBe('insufficient_quota')
    const max = maxCostFor(m.config, body)
    expect(err.message).toContain(`could cost up to ${formatUsdc(max)} USDC`)
    expect(err.message).toContain('0.000005 USDC is spendable (balance 0.000005, approved cap 0.000010, held 0.000000)')
    expect(err.message).toMatch(
      /Lower max_tokens, deposit USDC, or raise the approved spending cap\. Nothing was charged\./,
    )
    // Without max_tokens the bound is the model's maximum output, and the message says so instead of quoting a
    // max_tokens never sent.
    const { max_tokens: _sent, ...unbounded } = body as Record<string, unknown>
    const bare = await (await chat(m.url, key, unbounded)).json()
    expect(bare.error.message).toMatch(/a reply of up to [\d,]+ tokens, as no max_tokens was sent/)
    // The alias is named as the client sent it.
    const alias = await (
      await chat(m.url, key, { ...unbounded, max_completion_tokens: (body as { max_tokens: number }).max_tokens })
    ).json()
    expect(alias.error.message).toMatch(
      /\+ max_completion_tokens [\d,]+, at the offer price\).*Lower max_completion_tokens, deposit USDC/,
    )
    const after = (await m.store.accounts.byId(account.id))!
    expect(after).toMatchObject({ balance: 5n, held: 0n, cap: 10n })
    // A cap below the balance limits just the same.
    await depositTo(m.store, account.id, 1_000_000n, Date.now())
    expect((await chat(m.url, key, body)).status).toBe(402)
    await m.store.accounts.approve(account.id, 1_000_000n)
    expect((await chat(m.url, key, body)).status).toBe(200)
    const outcomes = (await m.store.usage.list(account.id, { limit: 10 })).map((u) => u.outcome)
    expect(outcomes).toEqual(['completed'])
    // The refusals are counted, not recorded one by one.
    await m.server.gateway.refusals.flush()
    const refused = await m.store.refusals.list(account.id, 0, 10)
    // Counted per minute: the four may straddle a minute's end.
    expect(new Set(refused.map((r) => r.code))).toEqual(new Set(['insufficient_quota']))
    expect(refused.reduce((n, r) => n + r.count, 0)).toBe(4)
  })

  it('holds exactly the maximum cost while serving', async () => {
    // Slow enough that the hold is still there when the poll reads it on a busy machine.
    m.sims.atlasCheap.setFault({ kind: 'slow', ms: 1_500 })
    try {
      const pending = chat(m.url, m.key, body)
      await expect.poll(async () => (await m.store.accounts.byId(m.accountId))!.held).toBe(maxCostFor(m.config, body))
      expect((await pending).status).toBe(200)
    } finally {
      m.sims.atlasCheap.setFault({ kind: 'none' })
    }
    expect((await m.store.accounts.byId(m.accountId))!.held).toBe(0n)
  })

  it('serves usage records to the key owner only, newest first, paginated', async () => {
    const mine = await fetch(`${m.url}/v1/usage?limit=2`, { headers: { authorization: `Bearer ${m.key}` } }).then((r) =>
      r.json(),
    )
    expect(mine.object).toBe('list')
    expect(mine.data).toHaveLength(2)
    expect(mine.has_more).toBe(true)
    expect(mine.data[0].created).toBeGreaterThanOrEqual(mine.data[1].created)
    const next = await fetch(`${m.url}/v1/usage?limit=100&after=${mine.last_id}`, {
      headers: { authorization: `Bearer ${m.key}` },
    }).then((r) => r.json())
    const ids = [...mine.data, ...next.data].map((u: { request_id: string }) => u.request_id)
    expect(new Set(ids).size).toBe(ids.length)
    const one = await fetch(`${m.url}/v1/usage/${ids[0]}`, { headers: { authorization: `Bearer ${m.key}` } }).then(
      (r) => r.json(),
    )
    expect(one).toMatchObject({ request_id: ids[0], object: 'usage.record' })
    expect(one.cost_usdc).toMatch(/^\d+\.\d{6}$/)
    const { account } = await openAccount(m.store, addressOf(0x98), Date.now())
    const other = await issueKey({ now: Date.now(), store: m.store, accountId: account.id, name: 'other' })
    const denied = await fetch(`${m.url}/v1/usage/${ids[0]}`, { headers: { authorization: `Bearer ${other.key}` } })
    expect(denied.status).toBe(404)
    expect((await fetch(`${m.url}/v1/usage`)).status).toBe(401)
    expect((await fetch(`${m.url}/v1/usage?limit=0`, { headers: { authorization: `Bearer ${m.key}` } })).status).toBe(
      400,
    )
  })

  it('settles captured charges once; a second pass finds nothing', async () => {
    const provider = (await m.store.accounts.byAddress(P.atlasCheap))!
    const pending = (await m.store.settlement.payeeTotals(provider.id)).pending
    expect(pending).toBeGreaterThan(0n)
    const first = await m.server.settler.runOnce()
    expect(first.batches.length).toBeGreaterThanOrEqual(1)
    expect(await m.server.settler.runOnce()).toEqual({
      ran: true,
      batches: [],
      waiting: { payers: [], payees: [] },
      unfinished: [],
    })
    const totals = await m.store.settlement.payeeTotals(provider.id)
    expect(totals.pending).toBe(0n)
    expect(totals.settled).toBeGreaterThanOrEqual(pending)
    await checkInvariants(m.store, m.accountId, FUNDS)
  })
})

describe('one settler at a time across processes', () => {
  it('takes the Postgres advisory lock', async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    const m = await startMarket({ store: 'postgres' })
    try {
      const { openStore } = await import('../src/store/open.js')
      const other = await openStore(m.config.store)
      try {
        const held = await m.store.tryLock('svc-settler')
        expect(held).not.toBeNull()
        expect(await other.tryLock('svc-settler')).toBeNull()
        const { Settler } = await import('../src/settlement/settler.js')
        const { LocalRail } = await import('../src/settlement/rail.js')
        expect(await new Settler(other, new LocalRail()).runOnce()).toEqual({
          ran: false,
          batches: [],
          waiting: { payers: [], payees: [] },
          unfinished: [],
        })
        // A store in another schema of the same database is another marketplace: its settler is not this one's.
        const elsewhere = await openStore(freshPostgresUrl())
        try {
          const theirs = await elsewhere.tryLock('svc-settler')
          expect(theirs).not.toBeNull()
          await theirs!.release()
        } finally {
          await elsewhere.close()
        }
        await held!.release()
        expect((await new Settler(other, new LocalRail()).runOnce()).ran).toBe(true)
      } finally {
        await other.close()
      }
    } finally {
      await m.close()
    }
  })
})

describe('a hold released under a running request', () => {
  it('reports cost 0 (nothing was charged) instead of a charge that never happened', async () => {
    // Budgets far beyond the test, so the stalled request waits for the test and does not fail over under load.
    const m = await startMarket({ tuning: { firstByteTimeoutMs: 60_000, replyTimeoutMs: 60_000 } })
    try {
      m.sims.atlasCheap.setFault({ kind: 'stall' })
      const pending = chat(m.url, m.key, {
        model: 'svc/atlas@1',
        messages: [{ role: 'user', content: 'slow one' }],
        max_tokens: 10,
      })
      await expect.poll(() => m.sims.atlasCheap.stats.active).toBe(1)
      // A sweeper (another instance, or this one after its lease lapsed) releases the hold as expired.
      expect(await m.store.ledger.releaseExpired(Date.now() + 10 * 3600_000)).toBe(1)
      const before = (await m.store.accounts.byId(m.accountId))!
      m.sims.atlasCheap.setFault({ kind: 'none' })
      const r = await (await pending).json()
      expect(r.svc.cost_usdc).toBe('0.000000')
      const after = (await m.store.accounts.byId(m.accountId))!
      expect(after.balance).toBe(before.balance)
      expect((await m.store.usage.get(m.accountId, r.svc.request_id))?.outcome).toBe('expired')
      await checkInvariants(m.store, m.accountId, 10_000_000n)
    } finally {
      await m.close()
    }
  })
})
