import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from './store.js'
import { spendableOf } from './accounts.js'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'

const usage = (requestId: string, accountId: number, cost: bigint) => usageRecord(requestId, accountId, cost)

/** The ledger side of the evm rail: wallets synced from chain reads, failed payers turned into debt. */
describe.each(STORE_KINDS)('chain sync on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let alice: number
  let bob: number
  let payee: number
  let fees: number
  let n = 0

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    ;({ store, user: alice, other: bob, payee, fees } = f)
  })
  afterAll(() => closeFixture(f))

  const charge = async (accountId: number, cost: bigint) => {
    const requestId = `r${n++}`
    expect(
      await store.ledger.hold({
        requestId,
        accountId,
        keyId: 'key_1',
        model: 'm',
        amount: cost,
        owner: 'i1',
        now: 1000,
        expiresAt: 99_999,
      }),
    ).toEqual({ ok: true })
    expect(
      await store.ledger.capture({
        requestId,
        cost,
        payeeId: payee,
        fee: cost / 10n,
        feeAccountId: fees,
        now: 1001,
        usage: usage(requestId, accountId, cost),
      }),
    ).toBe(true)
  }
  const sync = (id: number, balance: bigint, allowance: bigint, block: bigint) =>
    store.chain.sync(id, { balance, allowance, block }, `chain_${block}_${id}`, 2000)
  const account = async (id: number) => (await store.accounts.byId(id))!

  it('sets balance and cap from the wallet, with postings against svc:world that net to zero', async () => {
    const r = await sync(alice, 1_000n, 600n, 10n)
    expect(r).toMatchObject({ kind: 'synced', delta: 1_000n, owed: 0n })
    expect(await account(alice)).toMatchObject({ balance: 1_000n, cap: 600n })
    await sync(bob, 1_000n, 2n ** 256n - 1n, 10n) // an unlimited allowance is stored clamped
    expect((await account(bob)).cap).toBe(2n ** 63n - 1n)
    expect((await store.ledger.audit()).unbalanced).toEqual([])
  })

  it('subtracts what is captured and not yet settled, counted once', async () => {
    await charge(alice, 100n)
    expect(await account(alice)).toMatchObject({ balance: 900n, cap: 500n })
    expect(await store.chain.owed(alice)).toBe(100n)
    // The wallet still holds the 1000 until settlement: a new read changes nothing.
    expect(await sync(alice, 1_000n, 600n, 11n)).toMatchObject({ kind: 'synced', delta: 0n })
    expect(spendableOf(await account(alice))).toBe(500n)
  })

  it('ignores a read older than the last one or than a batch mined for the payer', async () => {
    expect(await sync(alice, 5_000n, 5_000n, 9n)).toEqual({ kind: 'stale' })
    const batch = (await store.settlement.createBatch({ id: 'b_floor', feeAccountId: fees, now: 3000 }))!
    await store.chain.recordMined(batch.id, 20n, [alice])
    expect(await sync(alice, 5_000n, 5_000n, 19n)).toEqual({ kind: 'stale' })
    expect((await account(alice)).balance).toBe(900n)
    expect(await store.settlement.markSettled(batch.id, 3001)).toBe(true)
    // At the mined block the wallet paid the 100: balance and cap unchanged, nothing owed.
    expect(await sync(alice, 900n, 500n, 20n)).toMatchObject({ kind: 'synced', delta: 0n, owed: 0n })
  })

  it('turns a failed payer into debt, settles the rest, and collects once the wallet covers it again', async () => {
    await charge(alice, 50n)
    await charge(bob, 70n)
    const batch = (await store.settlement.createBatch({ id: 'b_fail', feeAccountId: fees, now: 4000 }))!
    expect(batch.total).toBe(120n)
    const pendingBefore = (await store.accounts.books(payee)).pending
    expect(await store.settlement.markSettled(batch.id, 4001, [alice])).toBe(true)
    expect((await account(alice)).debt).toBe(50n)
    expect((await account(bob)).debt).toBe(0n)
    // Bob's payout moved to available; Alice's stays pending.
    expect((await store.accounts.books(payee)).pending).toBe(pendingBefore - 63n)
    expect(
      await store.ledger.hold({
        requestId: 'r_debt',
        accountId: alice,
        keyId: 'k',
        model: 'm',
        amount: 1n,
        owner: 'i1',
        now: 1000,
        expiresAt: 99_999,
      }),
    ).toMatchObject({ ok: false, reason: 'in_debt' })
    // Debtors' charges wait: nothing is due while Alice's wallet does not cover them.
    expect(await store.settlement.createBatch({ id: 'b_wait', feeAccountId: fees, now: 4002 })).toBeNull()
    expect(await sync(alice, 850n, 0n, 30n)).toMatchObject({ kind: 'synced', debtCleared: false })
    expect(await sync(alice, 850n, 500n, 31n)).toMatchObject({ kind: 'synced', debtCleared: true, owed: 50n })
    expect(await account(alice)).toMatchObject({ debt: 0n, balance: 800n, cap: 450n })
    const retry = (await store.settlement.createBatch({ id: 'b_retry', feeAccountId: fees, now: 4003 }))!
    expect(retry.total).toBe(50n)
    expect(await store.settlement.markSettled(retry.id, 4004)).toBe(true)
    expect((await store.accounts.books(payee)).pending).toBe(0n)
    const audit = await store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
    expect(audit.inconsistent).toEqual([])
  })

  it('stays exact while captures race with syncs', async () => {
    const carol = (await store.accounts.ensure('0x4444444444444444444444444444444444444444', 'user', 1000)).account.id
    await sync(carol, 10_000n, 10_000n, 100n)
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 4 === 0 ? sync(carol, 10_000n, 10_000n, BigInt(101 + i)) : charge(carol, 7n),
      ),
    )
    expect(await store.chain.owed(carol)).toBe(30n * 7n)
    expect(await account(carol)).toMatchObject({ balance: 10_000n - 210n, cap: 10_000n - 210n })
    const batch = (await store.settlement.createBatch({ id: 'b_race', feeAccountId: fees, now: 4500 }))!
    expect(batch.total).toBe(210n)
    expect(await store.settlement.markSettled(batch.id, 4501)).toBe(true)
  })

  it('keeps whole payers together when a batch has a leg limit', async () => {
    await charge(alice, 10n)
    await charge(bob, 10n)
    const first = (await store.settlement.createBatch({
      id: 'b_legs_1',
      feeAccountId: fees,
      now: 5000,
      limits: { maxLegs: 2 },
    }))!
    expect((await store.settlement.legs(first.id)).map((l) => l.payerId)).toEqual([alice, alice])
    const second = (await store.settlement.createBatch({
      id: 'b_legs_2',
      feeAccountId: fees,
      now: 5001,
      limits: { maxLegs: 2 },
    }))!
    expect((await store.settlement.legs(second.id)).map((l) => l.payerId)).toEqual([bob, bob])
    expect(
      await store.settlement.createBatch({ id: 'b_legs_3', feeAccountId: fees, now: 5002, limits: { maxLegs: 2 } }),
    ).toBeNull()
  })
})
