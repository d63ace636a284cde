import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Store } from './store.js'
import { spendableOf } from './accounts.js'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'

/**
 * A wallet that stops covering what its open holds reserve (USDC moved out, or the allowance lowered, while a request
 * runs): the request is captured as usual, nothing goes negative, nothing more is admitted until the wallet covers it,
 * and what the wallet could not pay is collected once, later.
 */
describe.each(STORE_KINDS)('a wallet short of what is held, on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let dave: number
  let payee: number
  let fees: number

  beforeEach(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    ;({ store, user: dave, payee, fees } = f)
  })
  afterEach(() => closeFixture(f))

  const hold = (requestId: string, amount: bigint) =>
    store.ledger.hold({
      requestId,
      accountId: dave,
      keyId: 'key_1',
      model: 'm',
      amount,
      owner: 'i1',
      now: 1000,
      expiresAt: 99_999,
    })
  const capture = (requestId: string, cost: bigint) =>
    store.ledger.capture({
      requestId,
      cost,
      payeeId: payee,
      fee: cost / 10n,
      feeAccountId: fees,
      now: 1001,
      usage: usageRecord(requestId, dave, cost),
    })
  const release = (requestId: string) =>
    store.ledger.release(requestId, 1001, usageRecord(requestId, dave, 0n, { outcome: 'provider_error' }))
  const sync = (balance: bigint, allowance: bigint, block: bigint) =>
    store.chain.sync(dave, { balance, allowance, block }, `chain_${block}_${dave}`, 2000)
  const account = async () => (await store.accounts.byId(dave))!
  const expectSound = async () => {
    const audit = await store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
    expect(audit.inconsistent).toEqual([])
  }

  it('captures the request in flight, refuses new ones, turns the unpaid part into debt and collects it once', async () => {
    await sync(1_000n, 1_000n, 10n)
    expect(await hold('r1', 600n)).toEqual({ ok: true })
    // 900 of the 1000 leave the wallet while r1 runs.
    expect(await sync(100n, 1_000n, 11n)).toMatchObject({ kind: 'synced', debtCleared: false })
    expect(spendableOf(await account())).toBe(0n)
    expect(await hold('r2', 1n)).toMatchObject({ ok: false, reason: 'insufficient' })
    await expectSound()

    expect(await capture('r1', 500n)).toBe(true)
    await expectSound()
    const after = await account()
    expect(after.held).toBe(0n)
    expect(after.balance).toBeGreaterThanOrEqual(0n)
    // What r1 did not use is not the wallet's: nothing is spendable before the next read either.
    expect(spendableOf(after)).toBe(0n)
    expect(await hold('r3', 1n)).toMatchObject({ ok: false, reason: 'insufficient' })

    // The next read: the wallet's 100 against 500 owed.
    expect(await sync(100n, 1_000n, 12n)).toMatchObject({ kind: 'synced', owed: 500n })
    expect(await account()).toMatchObject({ balance: 0n, held: 0n, debt: 0n })
    expect(await hold('r4', 1n)).toMatchObject({ ok: false, reason: 'insufficient' })
    await expectSound()

    // Settlement cannot collect the 500: the existing path records it as debt.
    const failed = (await store.settlement.createBatch({ id: 'b_short', feeAccountId: fees, now: 3000 }))!
    expect(failed.total).toBe(500n)
    expect(await store.settlement.markSettled(failed.id, 3001, [dave])).toBe(true)
    expect((await account()).debt).toBe(500n)
    expect(await hold('r5', 1n)).toMatchObject({ ok: false, reason: 'in_debt' })

    // Refilled to 1100: the debt is lifted, the 500 collected once, and the account works again.
    expect(await sync(1_100n, 1_000n, 13n)).toMatchObject({ kind: 'synced', debtCleared: true, owed: 500n })
    expect(await account()).toMatchObject({ balance: 600n, cap: 500n, held: 0n, debt: 0n })
    const retry = (await store.settlement.createBatch({ id: 'b_refilled', feeAccountId: fees, now: 3002 }))!
    expect(retry.total).toBe(500n)
    expect(await store.settlement.markSettled(retry.id, 3003)).toBe(true)
    expect(await store.settlement.createBatch({ id: 'b_nothing', feeAccountId: fees, now: 3004 })).toBeNull()
    expect(await store.chain.owed(dave)).toBe(0n)
    expect(await store.settlement.payeeTotals(payee)).toEqual({ pending: 0n, settled: 450n })
    expect(await sync(600n, 500n, 14n)).toMatchObject({ kind: 'synced', delta: 0n, owed: 0n })
    expect(await account()).toMatchObject({ balance: 600n, cap: 500n, held: 0n, debt: 0n })
    expect(await hold('r6', 100n)).toEqual({ ok: true })
    expect(await capture('r6', 100n)).toBe(true)
    expect(await account()).toMatchObject({ balance: 500n, cap: 400n, held: 0n })
    await expectSound()
  })

  it('leaves nothing spendable once several holds close under a short wallet, before any new read', async () => {
    await sync(1_000n, 1_000n, 10n)
    expect(await hold('r1', 600n)).toEqual({ ok: true })
    expect(await hold('r2', 300n)).toEqual({ ok: true })
    await sync(100n, 1_000n, 11n)
    expect(await capture('r1', 50n)).toBe(true)
    expect(await release('r2')).toBe(true)
    const a = await account()
    expect(a.held).toBe(0n)
    expect(a.balance).toBeGreaterThanOrEqual(0n)
    // The wallet covers 100 − 50 = 50 more; the 850 the holds freed are not there.
    expect(spendableOf(a)).toBe(50n)
    expect(await hold('r3', 51n)).toMatchObject({ ok: false, reason: 'insufficient' })
    await expectSound()
    expect(await sync(100n, 1_000n, 12n)).toMatchObject({ kind: 'synced', owed: 50n })
    expect(await account()).toMatchObject({ balance: 50n, cap: 950n, held: 0n })
    await expectSound()
  })

  it('never raises a lowered allowance back to what is held', async () => {
    await sync(1_000n, 1_000n, 10n)
    expect(await hold('r1', 600n)).toEqual({ ok: true })
    await sync(1_000n, 100n, 11n)
    expect((await account()).cap).toBe(100n)
    expect(await capture('r1', 500n)).toBe(true)
    expect(await account()).toMatchObject({ balance: 500n, cap: 0n, held: 0n })
    expect(await hold('r2', 1n)).toMatchObject({ ok: false, reason: 'insufficient' })
    await expectSound()
  })
})
