import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Store } from './store.js'
import { ADMISSION_GRACE_MS, prepaidAddress } from './x402.js'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'

const WALLET = '0x7777777777777777777777777777777777777777'
const nonce = (n: number) => `0x${n.toString(16).padStart(64, '0')}`

/**
 * x402 payments in the store: claimed once, credited once to the wallet's prepaid account, and what no request needs
 * returned by the next batch, never what a hold or an admission in progress reserves.
 */
describe.each(STORE_KINDS)('x402 payments and refunds on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let n = 0

  beforeEach(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    store = f.store
  })
  afterEach(() => closeFixture(f))

  /** A payment of `amount` claimed and credited at `now`; the prepaid account's id. */
  const pay = async (amount: bigint, now = 1000) => {
    const id = n++
    expect(
      await store.x402.claim({ payer: WALLET, nonce: nonce(id), requestId: `r${id}`, amount, validBefore: 9e9, now }),
    ).toBe(true)
    const accountId = (await store.x402.credit(WALLET, nonce(id), `0xtx${id}`, now))!
    expect(accountId).toBeGreaterThan(0)
    return { accountId, requestId: `r${id}`, nonce: nonce(id) }
  }
  const hold = (accountId: number, requestId: string, amount: bigint) =>
    store.ledger.hold({
      requestId,
      accountId,
      keyId: 'x402',
      model: 'm',
      amount,
      owner: 'i1',
      now: 1000,
      expiresAt: 9e12,
    })
  const capture = (accountId: number, requestId: string, cost: bigint) =>
    store.ledger.capture({
      requestId,
      cost,
      payeeId: f!.payee,
      fee: 0n,
      feeAccountId: f!.fees,
      now: 1000,
      usage: usageRecord(requestId, accountId, cost),
    })
  const batch = (now: number) => store.settlement.createBatch({ id: `bat_${n++}`, feeAccountId: f!.fees, now })
  const balanced = async () => {
    const audit = await store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
    expect(audit.inconsistent).toEqual([])
  }

  it('claims a payment once and credits it once, to a prepaid account of its own', async () => {
    const p = await pay(500n)
    expect(
      await store.x402.claim({
        payer: WALLET,
        nonce: p.nonce,
        requestId: 'rx',
        amount: 500n,
        validBefore: 9e9,
        now: 2,
      }),
    ).toBe(false)
    expect(await store.x402.credit(WALLET, p.nonce, '0xtx', 2000)).toBeNull()
    const account = (await store.accounts.byAddress(prepaidAddress(WALLET)))!
    expect(account).toMatchObject({ id: p.accountId, kind: 'prepaid', balance: 500n, held: 0n })
    expect((await store.x402.payment(WALLET, p.nonce))!).toMatchObject({ status: 'credited', amount: 500n })
    await balanced()
  })

  it('returns what a served request did not cost in the next batch, beside its charge', async () => {
    const p = await pay(500n)
    expect(await hold(p.accountId, p.requestId, 400n)).toEqual({ ok: true })
    await store.x402.settled(WALLET, p.nonce, 1000)
    // Reserved by the open hold: nothing to return yet but what it does not hold.
    const first = await batch(2000)
    expect(await store.settlement.legs(first!.id)).toEqual([
      { payerId: p.accountId, payeeId: p.accountId, amount: 100n },
    ])
    expect(await capture(p.accountId, p.requestId, 150n)).toBe(true)
    const second = (await batch(3000))!
    const legs = await store.settlement.legs(second.id)
    expect(legs).toEqual(
      expect.arrayContaining([
        { payerId: p.accountId, payeeId: f!.payee, amount: 150n },
        { payerId: p.accountId, payeeId: p.accountId, amount: 250n },
      ]),
    )
    expect(legs).toHaveLength(2)
    expect((await store.accounts.byId(p.accountId))!.balance).toBe(0n)
    await balanced()
    // Settled: the payee earned its leg; the refund leg earns no one anything.
    expect(await store.settlement.markSettled(second.id, 4000)).toBe(true)
    expect(await store.settlement.payeeTotals(f!.payee)).toEqual({ pending: 0n, settled: 150n })
    await balanced()
  })

  it('keeps a payment awaiting admission from refunds, and returns it whole once the grace has passed', async () => {
    const p = await pay(300n, 10_000)
    expect(await batch(10_000 + ADMISSION_GRACE_MS - 1)).toBeNull()
    const late = (await batch(10_000 + ADMISSION_GRACE_MS))!
    expect(await store.settlement.legs(late.id)).toEqual([{ payerId: p.accountId, payeeId: p.accountId, amount: 300n }])
    // Taken out: a hold now finds nothing to spend, so a refunded payment never serves.
    expect(await hold(p.accountId, p.requestId, 1n)).toMatchObject({ ok: false, reason: 'insufficient' })
    await balanced()
  })

  it('credits a refund back when the batch could not pay it, for a later batch to return', async () => {
    const p = await pay(200n)
    await store.x402.settled(WALLET, p.nonce, 1000)
    const b = (await batch(2000))!
    expect((await store.accounts.byId(p.accountId))!.balance).toBe(0n)
    expect(await store.settlement.markSettled(b.id, 3000, [], [p.accountId])).toBe(true)
    expect((await store.accounts.byId(p.accountId))!.balance).toBe(200n)
    const again = (await batch(4000))!
    expect(await store.settlement.legs(again.id)).toEqual([
      { payerId: p.accountId, payeeId: p.accountId, amount: 200n },
    ])
    await balanced()
  })
})
