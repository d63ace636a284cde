import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from '../store.js'
import { STORE_KINDS, postgresReachable } from '../../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../../test/helpers/store-fixture.js'
import type { HoldRequest } from './types.js'

const DAY = 86_400_000

/** A key's spend limit in the hot ledger: counted with the account's hold, closed with it, swept with a dead owner. */
describe.each(STORE_KINDS)('key spend limits in the ledger on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let user: number
  const spendOf = async (id: string) => (await store.keys.list(user)).find((k) => k.id === id)!.period
  const addKey = async (id: string, limit: bigint) => {
    const limits = { rpm: null, tpm: null, spend: { limit, reset: 'daily' as const } }
    await store.keys.insert({ id, accountId: user, hash: `h_${id}`, prefix: id, name: id, now: 1000, limits })
  }
  const hold = (requestId: string, keyId: string, amount: bigint, over: Partial<HoldRequest> = {}) =>
    store.ledger.hold({
      requestId,
      accountId: user,
      keyId,
      model: 'm',
      amount,
      owner: 'i1',
      now: 1000,
      expiresAt: 10 * DAY,
      spendReset: 'daily',
      ...over,
    })
  const capture = (requestId: string, cost: bigint, now = 2000) =>
    store.ledger.capture({
      requestId,
      cost,
      payeeId: f!.payee,
      fee: 0n,
      feeAccountId: f!.fees,
      now,
      usage: usageRecord(requestId, user, cost),
    })

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    ;({ store, user } = f)
    await store.accounts.deposit({ id: user, amount: 10_000n, ref: 'dep_1', now: 1000 })
    await store.accounts.approve(user, 10_000n)
    await addKey('key_a', 100n)
    await addKey('key_b', 50_000n)
    await addKey('key_c', 1_000n)
    await addKey('key_d', 1_000n)
  })
  afterAll(() => closeFixture(f))

  it('admits within the limit, refuses past it naming the counters, and counts closes in their period', async () => {
    expect(await hold('a1', 'key_a', 60n)).toEqual({ ok: true })
    const refused = await hold('a2', 'key_a', 50n)
    expect(refused).toMatchObject({ ok: false, reason: 'key_limit', key: { limit: 100n, reset: 'daily' } })
    expect(refused.ok === false && refused.reason === 'key_limit' && refused.key.periodHeld).toBe(60n)
    // Holds at once (one group on SQLite): 40 is left, so one of three holds of 30 fits.
    const three = await Promise.all(['a3', 'a4', 'a5'].map((id) => hold(id, 'key_a', 30n)))
    expect(three.filter((r) => r.ok)).toHaveLength(1)
    expect(await spendOf('key_a')).toMatchObject({ spent: 0n, held: 90n })
    expect(await capture('a1', 20n)).toBe(true)
    expect(await spendOf('key_a')).toMatchObject({ spent: 20n, held: 30n })
    // The account refuses a hold its key has room for: the key counts nothing of it.
    const dear = await hold('b1', 'key_b', 20_000n)
    expect(dear).toMatchObject({ ok: false, reason: 'insufficient' })
    expect(await spendOf('key_b')).toMatchObject({ held: 0n })
    // A close the next day starts that day's period with its charge.
    const open = three.findIndex((r) => r.ok)
    expect(await capture(['a3', 'a4', 'a5'][open]!, 7n, DAY + 5)).toBe(true)
    expect(await spendOf('key_a')).toMatchObject({ start: DAY, spent: 7n, held: 0n })
    expect(await hold('a6', 'key_a', 93n, { now: DAY + 6 })).toEqual({ ok: true })
    expect(await store.ledger.release('a6', DAY + 7, usageRecord('a6', user, 0n))).toBe(true)
    expect(await spendOf('key_a')).toMatchObject({ spent: 7n, held: 0n })
  })

  it('counts holds and closes of one key at once (one group on SQLite) as it would one by one', async () => {
    const ids = ['e1', 'e2', 'e3', 'e4']
    expect(await Promise.all(ids.map((id) => hold(id, 'key_d', 250n)))).toEqual(ids.map(() => ({ ok: true })))
    expect(await spendOf('key_d')).toMatchObject({ spent: 0n, held: 1_000n })
    const counted = () =>
      store.db.selectFrom('key_holds').select('held').where('key_id', '=', 'key_d').executeTakeFirstOrThrow()
    expect(Number((await counted()).held)).toBe(1_000)
    expect(await hold('e5', 'key_d', 1n)).toMatchObject({ ok: false, reason: 'key_limit' })
    expect(await Promise.all(ids.map((id, i) => capture(id, BigInt(10 * (i + 1)))))).toEqual([true, true, true, true])
    expect(await spendOf('key_d')).toMatchObject({ spent: 100n, held: 0n })
    expect(Number((await counted()).held)).toBe(0)
    expect(await store.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
  })

  it("takes a dead instance's holds out of its keys' counters", async () => {
    await store.instances.register({ id: 'i1', host: 'h', pid: 1, startedAt: 1000 })
    expect(await hold('d1', 'key_b', 300n, { owner: 'dead' })).toEqual({ ok: true })
    expect(await hold('d2', 'key_b', 200n)).toEqual({ ok: true })
    expect(await spendOf('key_b')).toMatchObject({ held: 500n })
    expect(await store.ledger.releaseOwnedBy(['dead'], 3000)).toBe(1)
    expect(await spendOf('key_b')).toMatchObject({ held: 200n })
    // Its close finds nothing held, and moves no counter.
    expect(await capture('d1', 100n)).toBe(false)
    expect(await spendOf('key_b')).toMatchObject({ spent: 0n, held: 200n })
    expect(await capture('d2', 150n)).toBe(true)
    expect(await spendOf('key_b')).toMatchObject({ spent: 150n, held: 0n })
    expect(await store.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
  })

  it("counts a close whose hold was admitted under another reset in the key's current period, wiping nothing", async () => {
    expect(await hold('c1', 'key_c', 100n, { now: DAY + 10 })).toEqual({ ok: true })
    expect(await capture('c1', 50n, DAY + 20)).toBe(true)
    expect(await spendOf('key_c')).toMatchObject({ start: DAY, spent: 50n })
    expect(await hold('c2', 'key_c', 100n, { now: DAY + 30 })).toEqual({ ok: true })
    // Made monthly while c2 runs: the month (from 1970-01-01) spent 50 so far.
    const monthly = { rpm: null, tpm: null, spend: { limit: 1_000n, reset: 'monthly' as const } }
    expect(await store.keys.setLimits(user, 'key_c', monthly, DAY + 40)).toBe(true)
    expect(await spendOf('key_c')).toMatchObject({ start: 0, spent: 50n })
    // c2 closes with the daily reset it was admitted under: its charge adds to the month's spend.
    expect(await capture('c2', 30n, DAY + 50)).toBe(true)
    expect(await spendOf('key_c')).toMatchObject({ start: 0, spent: 80n, held: 0n })
  })
})
