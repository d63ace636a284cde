import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from './store.js'
import { LocalRail } from '../settlement/rail.js'
import { Settler } from '../settlement/settler.js'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'

/** A batch built a few charges per transaction: whole at every commit, never sent while it is built. */
describe.each(STORE_KINDS)('a batch built in steps on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let payees: number[]
  let n = 0

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    store = f.store
    payees = [
      f.payee,
      (await store.accounts.ensure('0x5555555555555555555555555555555555555555', 'provider', 1000)).account.id,
    ]
    for (const id of [f.user, f.other]) {
      expect(await store.accounts.deposit({ id, amount: 10_000_000n, ref: `dep_${id}`, now: 1000 })).not.toBeNull()
      await store.accounts.approve(id, 10_000_000n)
    }
  })
  afterAll(() => closeFixture(f))

  /** `count` charges spread over both payers and both payees; their total with fees. */
  async function charges(count: number): Promise<bigint> {
    let total = 0n
    for (let i = 0; i < count; i++) {
      const requestId = `c${n++}`
      const accountId = i % 2 ? f!.user : f!.other
      const cost = 100n + BigInt(i % 7)
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
          payeeId: payees[i % 3 ? 0 : 1]!,
          fee: cost / 10n,
          feeAccountId: f!.fees,
          now: 1001,
          usage: usageRecord(requestId, accountId, cost),
        }),
      ).toBe(true)
      total += cost
    }
    return total
  }

  /** Each batch's legs are the sums of its charges, payer by payee and the fees beside; their total is its total. */
  async function whole(batchId: string): Promise<bigint> {
    const rows = await store.db
      .selectFrom('holds')
      .select(['account_id', 'payee_id', 'cost', 'fee'])
      .where('batch_id', '=', batchId)
      .execute()
    const expected = new Map<string, bigint>()
    const add = (payer: unknown, payee: unknown, amount: bigint) => {
      if (amount > 0n)
        expected.set(
          `${Number(payer)}:${Number(payee)}`,
          (expected.get(`${Number(payer)}:${Number(payee)}`) ?? 0n) + amount,
        )
    }
    for (const r of rows) {
      add(r.account_id, r.payee_id, BigInt(r.cost!) - BigInt(r.fee!))
      add(r.account_id, f!.fees, BigInt(r.fee!))
    }
    const legs = await store.settlement.legs(batchId)
    expect(new Map(legs.map((l) => [`${l.payerId}:${l.payeeId}`, l.amount]))).toEqual(expected)
    const total = legs.reduce((s, l) => s + l.amount, 0n)
    const [batch] = (await store.settlement.batches(['building', 'open', 'sent', 'settled'])).filter(
      (b) => b.id === batchId,
    )
    expect(batch!.total).toBe(total)
    return total
  }

  it('takes every due charge, three per transaction, into legs that add up', async () => {
    const total = await charges(20)
    const batch = await store.settlement.createBatch({
      id: 'b_steps',
      feeAccountId: f!.fees,
      now: 2000,
      limits: {},
      step: 3,
    })
    expect(batch).toMatchObject({ status: 'open', total })
    expect(await whole('b_steps')).toBe(total)
    expect((await store.settlement.batches(['open'])).map((b) => b.id)).toContain('b_steps')
    expect(
      await store.settlement.createBatch({ id: 'b_none', feeAccountId: f!.fees, now: 2001, limits: {}, step: 3 }),
    ).toBeNull()
  })

  /** Runs `between` once the batch `id` is building (between two of its steps, each one charge), within 1,000 turns. */
  async function whileBuilding(id: string, between: () => Promise<unknown>): Promise<void> {
    for (let turn = 0; turn < 1000; turn++) {
      await new Promise((resolve) => setImmediate(resolve))
      if ((await store.settlement.batches(['building'])).some((b) => b.id === id)) return void (await between())
    }
    throw new Error(`${id} was never seen building`)
  }

  it('is whole as far as it got when another settler opens it while it is built, the rest left due', async () => {
    await charges(200)
    // One charge per transaction; between two of them, a second settler opens every batch left building.
    const building = store.settlement.createBatch({
      id: 'b_race',
      feeAccountId: f!.fees,
      now: 3000,
      limits: {},
      step: 1,
    })
    await whileBuilding('b_race', () => store.settlement.openBuilt())
    // The settler that opened it sends it; this one leaves it alone.
    expect(await building).toBeNull()
    expect((await store.settlement.batches(['open'])).map((b) => b.id)).toContain('b_race')
    await whole('b_race')
    const left = await store.db
      .selectFrom('holds')
      .select('request_id')
      .where('batch_id', 'is', null)
      .where('status', '=', 'captured')
      .execute()
    expect(left.length).toBeGreaterThan(0)
    expect(left.length).toBeLessThan(200)
    // The rest goes in the next batch.
    const next = await store.settlement.createBatch({ id: 'b_rest', feeAccountId: f!.fees, now: 3001 })
    expect(next).not.toBeNull()
    expect(await whole('b_rest')).toBe(next!.total)
  })

  it('leaves out the charges of a payer that fell into debt while it was built', async () => {
    await charges(100)
    // As another settler's failed collection leaves it: the payer's charges wait until its debt is covered.
    const building = store.settlement.createBatch({
      id: 'b_debt',
      feeAccountId: f!.fees,
      now: 3500,
      limits: {},
      step: 1,
    })
    await whileBuilding('b_debt', () =>
      store.db.updateTable('accounts').set({ debt: 1n }).where('id', '=', f!.user).execute(),
    )
    expect(await building).not.toBeNull()
    await whole('b_debt')
    const left = await store.db
      .selectFrom('holds')
      .select(['account_id', 'request_id'])
      .where('batch_id', 'is', null)
      .where('status', '=', 'captured')
      .execute()
    // Every charge of the other payer went in; those of the one in debt that the build had not reached wait.
    expect(left.length).toBeGreaterThan(0)
    expect(new Set(left.map((r) => Number(r.account_id)))).toEqual(new Set([f!.user]))
    await store.db.updateTable('accounts').set({ debt: 0n }).where('id', '=', f!.user).execute()
    expect(await store.settlement.createBatch({ id: 'b_debt_rest', feeAccountId: f!.fees, now: 3501 })).not.toBeNull()
  })

  it('is opened and settled by the next pass when its settler stopped while building it', async () => {
    await charges(9)
    const batch = await store.settlement.createBatch({
      id: 'b_cut',
      feeAccountId: f!.fees,
      now: 4000,
      limits: {},
      step: 2,
    })
    // As a pass cut off between two steps leaves it (each step commits a whole, smaller batch).
    await store.db.updateTable('batches').set({ status: 'building' }).where('id', '=', 'b_cut').execute()
    expect((await store.settlement.batches(['open', 'sent'])).map((b) => b.id)).not.toContain('b_cut')
    const report = await new Settler(store, new LocalRail()).runOnce()
    expect(report.batches.map((b) => b.id)).toContain('b_cut')
    expect((await store.settlement.batches(['settled'])).find((b) => b.id === 'b_cut')?.total).toBe(batch!.total)
    expect(await store.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
  })
})
