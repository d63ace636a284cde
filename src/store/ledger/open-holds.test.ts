import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from '../store.js'
import { STORE_KINDS, postgresReachable } from '../../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../../test/helpers/store-fixture.js'

/**
 * An open hold is a counter in the store and its details in this instance's memory (docs/ledger-written-once.md):
 * the two must agree whatever commits. On SQLite the operations of one turn run as one transaction, rolled back and
 * replayed one by one when any of them fails; on Postgres each is its own statement.
 */
describe.each(STORE_KINDS)('open holds on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let user: number

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    ;({ store, user } = f)
    await store.accounts.deposit({ id: user, amount: 1_000n, ref: 'dep_1', now: 1000 })
    await store.accounts.approve(user, 1_000n)
  })
  afterAll(() => closeFixture(f))

  const hold = (requestId: string, owner = 'i1') =>
    store.ledger.hold({
      requestId,
      accountId: user,
      keyId: 'key_1',
      model: 'svc/atlas@1',
      amount: 100n,
      owner,
      now: 1000,
      expiresAt: 10_000,
    })
  const capture = (requestId: string, cost: bigint) =>
    store.ledger.capture({
      requestId,
      cost,
      payeeId: f!.payee,
      fee: 0n,
      feeAccountId: f!.fees,
      now: 1001,
      usage: usageRecord(requestId, user, cost),
    })

  it('keep what committed when operations of the same turn fail beside them', async () => {
    expect(await hold('dead_1', 'dead')).toEqual({ ok: true })
    expect(await store.ledger.releaseOwnedBy(['dead'], 1000)).toBe(1)
    expect(await hold('c1')).toEqual({ ok: true })
    expect(await hold('bad')).toEqual({ ok: true })
    // One turn: a hold, a capture, a capture above its hold (a bug: refused), a hold by an owner taken for dead.
    const results = await Promise.allSettled([
      hold('h1'),
      capture('c1', 40n),
      capture('bad', 101n),
      hold('dead_2', 'dead'),
    ])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected'])
    expect(results.slice(0, 2).map((r) => (r as PromiseFulfilledResult<unknown>).value)).toEqual([{ ok: true }, true])
    // In memory: the committed hold, and the refused capture's hold still open; the captured and the refused hold not.
    expect(['h1', 'c1', 'bad', 'dead_2'].map((id) => store.ledger.leaseOf(id) !== undefined)).toEqual([
      true,
      false,
      true,
      false,
    ])
    // In the store: the same two, counted, and held.
    expect(await store.ledger.openHolds()).toBe(2)
    expect(await store.accounts.byId(user)).toMatchObject({ balance: 960n, held: 200n })
    // Closed once: a second capture finds nothing.
    expect(await capture('c1', 40n)).toBe(false)
    expect(await capture('bad', 100n)).toBe(true)
    expect(await store.ledger.release('h1', 1002, usageRecord('h1', user, 0n))).toBe(true)
    expect(await store.ledger.openHolds()).toBe(0)
    expect(await store.accounts.byId(user)).toMatchObject({ balance: 860n, held: 0n })
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })

  it('keep the counter of a hold that commits while its stopping instance retires', async () => {
    const other = (await store.accounts.ensure('0x4444444444444444444444444444444444444444', 'user', 1000)).account.id
    await store.accounts.deposit({ id: other, amount: 1_000n, ref: 'dep_other', now: 1000 })
    await store.accounts.approve(other, 1_000n)
    await store.instances.register({ id: 'stopping', host: 'h', pid: 1, startedAt: 1000 })
    expect(await hold('before', 'stopping')).toEqual({ ok: true })
    await store.instances.remove(['stopping'])
    // A request still in flight as the server closed: its hold commits after the release read the instance's counters
    // (none on this account yet), before their delete.
    const releaseOwnedBy = store.ledger.releaseOwnedBy.bind(store.ledger)
    let late: unknown
    store.ledger.releaseOwnedBy = async (owners, now) => {
      const released = await releaseOwnedBy(owners, now)
      late = await store.ledger.hold({
        requestId: 'late',
        accountId: other,
        keyId: 'key_1',
        model: 'svc/atlas@1',
        amount: 100n,
        owner: 'stopping',
        now: 1000,
        expiresAt: 10_000,
      })
      return released
    }
    try {
      expect(await store.ledger.retire('stopping', 2000)).toBe(1)
    } finally {
      store.ledger.releaseOwnedBy = releaseOwnedBy
    }
    expect(late).toEqual({ ok: true })
    expect(await store.accounts.byId(other)).toMatchObject({ held: 100n })
    // Its counter is still there: the request's own release returns what it held.
    expect(await store.ledger.release('late', 2001, usageRecord('late', other, 0n))).toBe(true)
    expect(await store.accounts.byId(other)).toMatchObject({ balance: 1_000n, held: 0n })
    expect(await store.accounts.byId(user)).toMatchObject({ held: 0n })
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })

  it('close no hold twice when a stopping instance holds again after it retired', async () => {
    const payer = (await store.accounts.ensure('0x5555555555555555555555555555555555555555', 'user', 1000)).account.id
    await store.accounts.deposit({ id: payer, amount: 100n, ref: 'dep_payer', now: 1000 })
    await store.accounts.approve(payer, 100n)
    const holdOf = (requestId: string, amount: bigint) =>
      store.ledger.hold({
        requestId,
        accountId: payer,
        keyId: 'key_1',
        model: 'svc/atlas@1',
        amount,
        owner: 'retiring',
        now: 1000,
        expiresAt: 10_000,
      })
    await store.instances.register({ id: 'retiring', host: 'h', pid: 1, startedAt: 1000 })
    expect(await holdOf('r1', 60n)).toEqual({ ok: true })
    await store.instances.remove(['retiring'])
    // r1's close was lost to a slow store: retiring releases its hold.
    expect(await store.ledger.retire('retiring', 2000)).toBe(1)
    // A request admitted as the server closed: its counter is dead, so it is refused, not counted afresh.
    await expect(holdOf('r2', 80n)).rejects.toThrow()
    // r1's capture arrives late: its hold was released, so it takes nothing (from r2's hold least of all).
    expect(
      await store.ledger.capture({
        requestId: 'r1',
        cost: 60n,
        payeeId: f!.payee,
        fee: 0n,
        feeAccountId: f!.fees,
        now: 2001,
        usage: usageRecord('r1', payer, 60n),
      }),
    ).toBe(false)
    expect(await store.accounts.byId(payer)).toMatchObject({ balance: 100n, held: 0n })
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
    // Its dead counters go once nothing of it can hold or close any more (the store closing calls this).
    const counters = async () =>
      (await store.db.selectFrom('owner_holds').select('dead').where('owner', '=', 'retiring').execute()).map((r) =>
        Number(r.dead),
      )
    expect(await counters()).toEqual([1])
    await store.ledger.forgetRetired()
    expect(await counters()).toEqual([])
  })
})
