import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { postgresReachable } from '../../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../../test/helpers/store-fixture.js'
import { capturedClose, recordRow, sweptClose, SWEPT_COLUMNS, type HoldRequest } from '../ledger/types.js'
import { rowJson } from './ledger-ops.js'

/** The Postgres hot ledger's group commit: many requests' holds and closes in one call, each as exact as alone. */
describe('ledger groups on postgres', () => {
  let f: StoreFixture | undefined
  const commits: number[] = []

  beforeAll(async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    f = await openFixture('postgres')
    f.store.ledger.observeCommits((ops) => commits.push(ops))
  })
  afterAll(() => closeFixture(f))

  const hold = (requestId: string, accountId: number, amount: bigint): HoldRequest => ({
    requestId,
    accountId,
    keyId: 'k',
    model: 'm',
    amount,
    owner: 'i1',
    now: 1000,
    expiresAt: 90_000,
  })

  const capture = (h: HoldRequest, cost: bigint, now: number, usage = usageRecord(h.requestId, h.accountId, cost)) =>
    f!.store.ledger.capture({
      requestId: h.requestId,
      cost,
      payeeId: f!.payee,
      fee: 0n,
      feeAccountId: f!.fees,
      now,
      usage,
    })

  it('admits exactly what one account can pay of holds at once, and captures them exactly, in groups', async () => {
    const { store, user, other } = f!
    for (const id of [user, other]) {
      await store.accounts.deposit({ id, amount: 200n, ref: `dep_${id}`, now: 1000 })
      await store.accounts.approve(id, 200n)
    }
    // 60 holds of 10 over two accounts that can each pay 20 of them.
    const asked = Array.from({ length: 60 }, (_, i) => hold(`r${i}`, i % 2 ? user : other, 10n))
    const results = await Promise.all(asked.map((h) => store.ledger.hold(h)))
    const admitted = asked.filter((_, i) => results[i]!.ok)
    expect(admitted.filter((h) => h.accountId === user)).toHaveLength(20)
    expect(admitted.filter((h) => h.accountId === other)).toHaveLength(20)
    for (const r of results.filter((r) => !r.ok)) expect(r).toMatchObject({ reason: 'insufficient' })
    expect(Math.max(...commits)).toBeGreaterThan(1)
    expect((await store.accounts.byId(user))!.held).toBe(200n)
    // Their captures at once: each charged once, the rest of its hold released.
    const captured = await Promise.all(admitted.map((h, i) => capture(h, BigInt(i % 7), 2000)))
    expect(captured.every(Boolean)).toBe(true)
    const charged = (accountId: number) =>
      admitted.reduce((sum, h, i) => sum + (h.accountId === accountId ? BigInt(i % 7) : 0n), 0n)
    for (const id of [user, other])
      expect(await store.accounts.byId(id)).toMatchObject({ held: 0n, balance: 200n - charged(id) })
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })

  it("admits an account's holds after its closes of the same group, all at once or one by one", async () => {
    const { store } = f!
    const id = (await store.accounts.ensure('0x6666666666666666666666666666666666666666', 'user', 1000)).account.id
    await store.accounts.deposit({ id, amount: 100n, ref: 'dep_mixed', now: 1000 })
    await store.accounts.approve(id, 100n)
    const first = Array.from({ length: 5 }, (_, i) => hold(`m${i}`, id, 20n))
    expect((await Promise.all(first.map((h) => store.ledger.hold(h)))).every((r) => r.ok)).toBe(true)
    // One group: five captures of 10 free 50 of what is spendable; of four holds of 20 after them, two fit.
    commits.length = 0
    const more = Array.from({ length: 4 }, (_, i) => hold(`n${i}`, id, 20n))
    const [closed, held] = await Promise.all([
      Promise.all(first.map((h) => capture(h, 10n, 2000))),
      Promise.all(more.map((h) => store.ledger.hold(h))),
    ])
    expect(commits).toEqual([9])
    expect(closed.every(Boolean)).toBe(true)
    expect(held.map((r) => r.ok)).toEqual([true, true, false, false])
    expect(await store.accounts.byId(id)).toMatchObject({ balance: 50n, held: 40n, cap: 50n })
    // One group again, the hold fitting after the closes: the account written once for both.
    commits.length = 0
    const last = hold('o0', id, 10n)
    const [again, lastHeld] = await Promise.all([
      Promise.all(more.slice(0, 2).map((h) => capture(h, 5n, 3000))),
      store.ledger.hold(last),
    ])
    expect(commits).toEqual([3])
    expect([...again, lastHeld.ok]).toEqual([true, true, true])
    expect(await store.accounts.byId(id)).toMatchObject({ balance: 40n, held: 10n, cap: 40n })
    expect(await capture(last, 10n, 4000)).toBe(true)
    expect(await store.accounts.byId(id)).toMatchObject({ balance: 30n, held: 0n, cap: 30n })
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })

  it('writes as swept, in a group, the closes of holds a sweep released first', async () => {
    const { store, other } = f!
    const asked = Array.from({ length: 6 }, (_, i) => ({ ...hold(`s${i}`, other, 1n), owner: 'i2' }))
    expect((await Promise.all(asked.map((h) => store.ledger.hold(h)))).every((r) => r.ok)).toBe(true)
    // Taken for dead: its counter on the account is released and marked dead.
    expect(await store.ledger.releaseOwnedBy(['i2'], 2500)).toBe(6)
    commits.length = 0
    const closed = await Promise.all(asked.map((h) => capture(h, 1n, 2600)))
    expect(closed).toEqual(asked.map(() => false))
    expect(Math.max(...commits)).toBeGreaterThan(1)
    for (const h of asked)
      expect(await store.usage.get(other, h.requestId)).toMatchObject({ outcome: 'abandoned', cost: 0n })
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })

  it('leaves a close whose row is already written to that row, in a group, and puts its counts back', async () => {
    const { store, user } = f!
    const asked = Array.from({ length: 3 }, (_, i) => ({ ...hold(`d${i}`, user, 5n), owner: 'i3' }))
    expect((await Promise.all(asked.map((h) => store.ledger.hold(h)))).every((r) => r.ok)).toBe(true)
    const before = (await store.accounts.byId(user))!
    // d1's row is there already, as when an earlier close of it committed and its answer was lost.
    await store.ledger.record(usageRecord('d1', user, 0n))
    commits.length = 0
    const closed = await Promise.all(asked.map((h) => capture(h, 2n, 2700)))
    expect(closed).toEqual([true, false, true])
    expect(Math.max(...commits)).toBeGreaterThan(1)
    // Charged twice, not three times; d1's hold stays counted (its earlier close, here none, would have taken it).
    expect(await store.accounts.byId(user)).toMatchObject({ balance: before.balance - 4n, held: before.held - 10n })
    const counter = await store.db
      .selectFrom('owner_holds')
      .select(['held', 'open'])
      .where('owner', '=', 'i3')
      .executeTakeFirstOrThrow()
    expect({ held: BigInt(counter.held), open: Number(counter.open) }).toEqual({ held: 5n, open: 1 })
    expect((await store.usage.get(user, 'd1'))!.cost).toBe(0n)
    expect(await store.ledger.releaseOwnedBy(['i3'], 2800)).toBe(1)
  })

  it('runs each operation of a group the server refused alone: only the bad one fails', async () => {
    const { store, user } = f!
    const asked = Array.from({ length: 8 }, (_, i) => hold(`b${i}`, user, 1n))
    expect((await Promise.all(asked.map((h) => store.ledger.hold(h)))).every((r) => r.ok)).toBe(true)
    // A model name Postgres cannot store (a NUL byte) fails its row, in a group and alone.
    const closes = asked.map((h, i) =>
      capture(h, 1n, 3000, {
        ...usageRecord(h.requestId, user, 1n),
        ...(i === 3 ? { servedModel: 'bad\u0000model' } : {}),
      }),
    )
    const settled = await Promise.allSettled(closes)
    expect(settled.filter((s) => s.status === 'rejected')).toHaveLength(1)
    expect(settled[3]!.status).toBe('rejected')
    expect(settled.filter((s) => s.status === 'fulfilled' && s.value === true)).toHaveLength(7)
    // The failed close left its hold open and counted; its release closes it.
    expect(await store.ledger.release('b3', 3001, usageRecord('b3', user, 0n))).toBe(true)
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })
})

describe("a group's swept rows", () => {
  it("are the close's rows with SWEPT_COLUMNS, as sweptClose makes them", () => {
    const h = { requestId: 'r', accountId: 7, keyId: 'k', model: 'm', amount: 90n, owner: 'i', now: 1, expiresAt: 2 }
    const close = capturedClose({
      requestId: 'r',
      cost: 60n,
      payeeId: 3,
      fee: 6n,
      feeAccountId: 4,
      now: 5,
      usage: usageRecord('r', 7, 60n),
    })
    const swept = rowJson(recordRow(h, sweptClose(close)))
    expect({ ...rowJson(recordRow(h, close)), ...SWEPT_COLUMNS }).toEqual(swept)
  })
})
