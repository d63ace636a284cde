import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Auditor } from '../src/audit/auditor.js'
import { STORE_KINDS, postgresReachable } from './helpers/stores.js'
import { addressOf, chat, P, startMarket, type Market } from './helpers/market.js'
import { checkInvariants } from './helpers/money.js'
import { atlasOffer, auditedAtlas, cheating, fundAuditor } from './helpers/audits.js'

const AUDITOR = addressOf(0x5d)
const FUNDS = 1_000_000n

/**
 * Money follows the audits: a quarantined offer's earnings since its last passed audit stay out of settlement until an
 * operator releases them (paid) or forfeits them (refunded to the payers they came from); the rest is paid as usual.
 */
describe.each(STORE_KINDS)('held earnings on %s', (kind) => {
  let m: Market
  let auditor: Auditor
  let auditAccount: number
  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    m = await startMarket({
      store: kind,
      edit: (c) => {
        auditedAtlas(c, AUDITOR)
        c.tuning = { ...c.tuning, settleIntervalMs: 0 }
      },
    })
    auditor = m.server.gateway.auditor!
    auditAccount = await fundAuditor(m, AUDITOR, FUNDS)
  })
  afterAll(() => m?.close())

  const cheap = () => atlasOffer(m, P.atlasCheap)
  const served = async () => {
    const res = await chat(m.url, m.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 8,
      provider: { only: [P.atlasCheap] },
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { svc: { cost_usdc: string; request_id: string } }
    lastRequest = body.svc.request_id
    return BigInt(Math.round(Number(body.svc.cost_usdc) * 1e6))
  }
  let lastRequest = ''
  const batchOf = async (requestId: string) =>
    (
      await m.store.db
        .selectFrom('holds')
        .select('batch_id')
        .where('request_id', '=', requestId)
        .executeTakeFirstOrThrow()
    ).batch_id
  const quarantine = () =>
    cheating(m, { kind: 'substitute' }, async () => {
      for (let i = 0; i < 3; i++) await auditor.audit(cheap())
    })
  const clientBalance = async () => (await m.store.accounts.byId(m.accountId))!.balance
  const settledTo = async (provider: string) => {
    const account = (await m.store.accounts.byAddress(provider))!
    return m.store.settlement.payeeTotals(account.id)
  }

  it('holds back what was earned since the last passed audit, pays the rest, and refunds the held on forfeit', async () => {
    await served() // before the passed audit: paid as usual
    await sleep(5)
    expect((await auditor.audit(cheap())).result).toBe('passed')
    await sleep(5)
    const heldCosts = [await served(), await served()]
    await quarantine()
    const [held] = await m.store.heldEarnings.list('held')
    expect(held).toMatchObject({ provider: P.atlasCheap, model: 'svc/atlas@1', status: 'held' })
    // The two requests after the passed audit, and the three failed audits' own charges.
    const amount = await m.store.heldEarnings.amount(held!)
    expect(amount.charges).toBe(5)
    expect(amount.total).toBeGreaterThan(heldCosts[0]! + heldCosts[1]!)

    await m.server.settler.runOnce()
    const afterSettle = await settledTo(P.atlasCheap)
    expect(afterSettle.settled).toBeGreaterThan(0n)
    // What is held is still pending: no batch took it.
    expect(await m.store.heldEarnings.amount(held!)).toEqual(amount)
    const unsettled = await m.store.settlement.unsettled()
    expect(unsettled).toBeGreaterThanOrEqual(amount.total)

    const before = await clientBalance()
    const provider = (await m.store.accounts.byAddress(P.atlasCheap))!.id
    const earnedBefore = await m.store.settlement.payeeEarnings(provider)
    const forfeit = await m.store.heldEarnings.forfeit(held!.id, Date.now(), 'served another model')
    // What it forfeited is no longer what it earned.
    const earnedAfter = await m.store.settlement.payeeEarnings(provider)
    expect(earnedBefore.requests - earnedAfter.requests).toBe(5)
    expect(earnedBefore.gross - earnedAfter.gross).toBe(amount.total)
    expect(forfeit).toEqual({ charges: 5, refunded: amount.total })
    // Each payer got its own charges back: the client its two requests', the audit account its audits'.
    expect((await clientBalance()) - before).toBe(heldCosts[0]! + heldCosts[1]!)
    expect(await m.store.heldEarnings.forfeit(held!.id, Date.now(), null)).toBeUndefined()
    expect(await m.store.heldEarnings.get(held!.id)).toMatchObject({
      status: 'forfeited',
      note: 'served another model',
      refunded: amount.total,
      refundedCharges: 5,
    })
    // Forfeited charges are never settled; the provider's pending earnings lost them.
    expect(await m.store.settlement.unsettled()).toBe(unsettled - amount.total)
    await m.server.settler.runOnce()
    expect((await settledTo(P.atlasCheap)).settled).toBe(afterSettle.settled)
    expect((await settledTo(P.atlasCheap)).pending).toBe(0n)
    const audit = await m.store.ledger.audit()
    expect([audit.unbalanced, audit.inconsistent]).toEqual([[], []])
    // The audit account paid for every audit but the three it got back.
    await checkInvariants(m.store, auditAccount, FUNDS + amount.total - heldCosts[0]! - heldCosts[1]!)
  })

  it('pays held earnings in the next batch once released', async () => {
    // Eight passed audits end the quarantine; the earnings stay held until a decision.
    for (let i = 0; i < 8; i++) await auditor.audit(cheap())
    expect(m.server.gateway.catalog.stateOf(cheap().key)).toBe('suspect')
    await sleep(5)
    const cost = await served()
    await quarantine()
    const [held] = await m.store.heldEarnings.list('held')
    const heldRequest = lastRequest
    // One hold open per offer, whoever asks for another.
    const again = await m.store.heldEarnings.hold({ ...held!, id: 'held_again', auditId: 'aud_x', now: Date.now() })
    expect(again).toMatchObject({ created: false, held: { id: held!.id } })
    // Eight passed audits end the quarantine: a request that begins after it is paid as usual; the held stay held.
    for (let i = 0; i < 8; i++) await auditor.audit(cheap())
    expect(m.server.gateway.catalog.stateOf(cheap().key)).toBe('suspect')
    expect((await m.store.heldEarnings.get(held!.id))!.toAt).not.toBeNull()
    await sleep(5)
    await served()
    const after8 = lastRequest
    const amount = await m.store.heldEarnings.amount(held!)
    expect(amount.total).toBeGreaterThanOrEqual(cost)
    await m.server.settler.runOnce()
    expect(await batchOf(heldRequest)).toBeNull()
    expect(await batchOf(after8)).toMatch(/^bat_/)
    const before = await settledTo(P.atlasCheap)
    expect(await m.store.heldEarnings.release(held!.id, Date.now(), 'a kernel bug, fixed')).toBe(true)
    expect(await m.store.heldEarnings.release(held!.id, Date.now(), null)).toBe(false)
    await m.server.settler.runOnce()
    const after = await settledTo(P.atlasCheap)
    // What was held (its earnings after the marketplace's fee) was all that stayed pending; now it is paid.
    expect(before.pending).toBeGreaterThan(0n)
    expect(before.pending).toBeLessThanOrEqual(amount.total)
    expect(after).toEqual({ pending: 0n, settled: before.settled + before.pending })
    expect(await batchOf(heldRequest)).toMatch(/^bat_/)
    // A charge already in a batch is never forfeited: a hold over all of them claims none.
    await m.store.heldEarnings.hold({ ...held!, id: 'held_late', fromAt: 0, auditId: 'aud_y', now: Date.now() })
    expect(await m.store.heldEarnings.forfeit('held_late', Date.now(), null)).toEqual({ charges: 0, refunded: 0n })
    const audit = await m.store.ledger.audit()
    expect([audit.unbalanced, audit.inconsistent]).toEqual([[], []])
  })
})
