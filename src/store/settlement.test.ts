import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from './store.js'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'

/**
 * Batching: never more legs than one chain transaction may carry, refused accounts' charges left waiting, uncollected
 * payers' charges due again.
 */
describe.each(STORE_KINDS)('settlement batches on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let alice: number
  let bob: number
  let fees: number
  const providers: number[] = []
  let n = 0

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    ;({ store, user: alice, other: bob, fees } = f)
    providers.push(f.payee)
    for (const a of ['0x5555555555555555555555555555555555555555', '0x6666666666666666666666666666666666666666']) {
      providers.push((await store.accounts.ensure(a, 'provider', 1000)).account.id)
    }
    for (const id of [alice, bob]) {
      expect(await store.accounts.deposit({ id, amount: 1_000_000n, ref: `dep_${id}`, now: 1000 })).not.toBeNull()
      await store.accounts.approve(id, 1_000_000n)
    }
  })
  afterAll(() => closeFixture(f))

  const charge = async (accountId: number, payeeId: number, cost: bigint) => {
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
        payeeId,
        fee: cost / 10n,
        feeAccountId: fees,
        now: 1001,
        usage: usageRecord(requestId, accountId, cost),
      }),
    ).toBe(true)
  }

  /** Batches until nothing is due; the legs of each. */
  const drain = async (prefix: string, maxLegs: number) => {
    const out: { total: bigint; legs: Awaited<ReturnType<Store['settlement']['legs']>> }[] = []
    for (let i = 0; ; i++) {
      const batch = await store.settlement.createBatch({
        id: `${prefix}_${i}`,
        feeAccountId: fees,
        now: 2000 + i,
        limits: { maxLegs },
      })
      if (!batch) return out
      out.push({ total: batch.total, legs: await store.settlement.legs(batch.id) })
      expect(i).toBeLessThan(10)
    }
  }

  it('splits a payer whose payees and fee need more legs than a batch may carry', async () => {
    for (const p of providers) await charge(alice, p, 1_000n)
    await charge(alice, providers[0]!, 500n)
    const batches = await drain('b_split', 2)
    for (const b of batches) expect(b.legs.length).toBeLessThanOrEqual(2)
    // Three payees, each paid once: its own charges in one batch, with the fee leg beside them.
    expect(batches).toHaveLength(3)
    expect(batches.map((b) => b.legs.map((l) => l.payeeId))).toEqual(
      providers.map((p) => [p, fees].sort((a, b) => a - b)),
    )
    expect(batches.reduce((s, b) => s + b.total, 0n)).toBe(3_500n)
    expect(batches[0]!.legs.find((l) => l.payeeId === providers[0])!.amount).toBe(1_350n)
  })

  it('fills a batch with whole payers and starts the next with what did not fit', async () => {
    for (const p of providers) await charge(alice, p, 100n)
    await charge(bob, providers[0]!, 100n)
    const batches = await drain('b_fill', 3)
    for (const b of batches) expect(b.legs.length).toBeLessThanOrEqual(3)
    const legs = batches.flatMap((b) => b.legs)
    // Every charge settled exactly once: one leg per payer and payee, one fee leg per payer and batch.
    expect(
      legs
        .filter((l) => l.payeeId !== fees)
        .map((l) => `${l.payerId}:${l.payeeId}`)
        .sort(),
    ).toEqual([...providers.map((p) => `${alice}:${p}`), `${bob}:${providers[0]}`].sort())
    expect(batches.reduce((s, b) => s + b.total, 0n)).toBe(400n)
  })

  it('leaves out the charges of refused payers and payees, and all with a fee when the fee account is refused', async () => {
    await charge(alice, providers[0]!, 100n)
    await charge(alice, providers[1]!, 100n)
    await charge(bob, providers[1]!, 100n)
    const exclude = (payers: number[], payees: number[]) => ({ exclude: { payers, payees } })
    expect(
      await store.settlement.createBatch({
        id: 'b_none',
        feeAccountId: fees,
        now: 3000,
        limits: exclude([alice, bob], []),
      }),
    ).toBeNull()
    expect(
      await store.settlement.createBatch({ id: 'b_nofee', feeAccountId: fees, now: 3000, limits: exclude([], [fees]) }),
    ).toBeNull()
    const some = (await store.settlement.createBatch({
      id: 'b_some',
      feeAccountId: fees,
      now: 3001,
      limits: exclude([bob], [providers[1]!]),
    }))!
    expect((await store.settlement.legs(some.id)).map((l) => [l.payerId, l.payeeId])).toEqual(
      [
        [alice, providers[0]],
        [alice, fees],
      ].sort((a, b) => a[1]! - b[1]!),
    )
    expect(await store.settlement.duePayees()).toEqual([providers[1]])
    const rest = (await store.settlement.createBatch({ id: 'b_rest', feeAccountId: fees, now: 3002 }))!
    expect(rest.total).toBe(200n)
    for (const id of [some.id, rest.id]) expect(await store.settlement.markSettled(id, 3003)).toBe(true)
  })

  it('returns the charges of a deferred payer to the due pool without debt, and pays its payees nothing', async () => {
    const payee = providers[2]!
    await charge(alice, payee, 1_000n)
    await charge(bob, payee, 1_000n)
    const before = (await store.accounts.books(payee)).pending
    const batch = (await store.settlement.createBatch({ id: 'b_defer', feeAccountId: fees, now: 4000 }))!
    expect(await store.settlement.markSettled(batch.id, 4001, [bob], [alice])).toBe(true)
    expect((await store.accounts.byId(alice))!.debt).toBe(0n)
    expect((await store.accounts.byId(bob))!.debt).toBe(1_000n)
    expect((await store.accounts.books(payee)).pending).toBe(before)
    expect((await store.settlement.payeeBatches(payee)).map((b) => b.id)).not.toContain(batch.id)
    // Alice's charge is due again (Bob's waits for his debt).
    const again = (await store.settlement.createBatch({ id: 'b_defer_2', feeAccountId: fees, now: 4002 }))!
    expect((await store.settlement.legs(again.id)).map((l) => l.payerId)).toEqual([alice, alice])
    expect(await store.settlement.markSettled(again.id, 4003)).toBe(true)
    expect((await store.accounts.books(payee)).pending).toBe(before - 900n)
    const audit = await store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
    expect(audit.inconsistent).toEqual([])
  })
})
