import { afterEach, describe, expect, it } from 'vitest'
import BetterSqlite3 from 'better-sqlite3'
import { sql } from 'kysely'
import type { Store } from '../store.js'
import { spendableOf } from '../accounts.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../../test/helpers/store-fixture.js'
import { ledgerOps } from '../../../test/helpers/ledger-ops.js'

/**
 * The SQLite file's ledger runs the operations of one event-loop turn as one group (one transaction), on the event
 * loop's connection, beside the store's other transactions and other processes' (hot-ledger.test.ts: its WAL syncs).
 */
describe('the hot ledger of a SQLite file, a group per turn', () => {
  let f: StoreFixture | undefined
  let url: string
  let ids: { user: number; other: number; payee: number; fees: number }
  afterEach(async () => {
    await closeFixture(f)
    f = undefined
  })

  async function open(): Promise<Store> {
    f = await openFixture('sqlite')
    url = f.url
    ids = { user: f.user, other: f.other, payee: f.payee, fees: f.fees }
    for (const account of [ids.user, ids.other]) {
      await f.store.accounts.deposit({ id: account, amount: 10n ** 9n, ref: `dep_${account}`, now: 1000 })
      await f.store.accounts.approve(account, 10n ** 9n)
    }
    return f.store
  }

  const { hold, capture, serve, status } = ledgerOps(() => ({ ids, url }))

  it("moves an account's counters once for the holds and closes of one turn, with the outcomes of one by one", async () => {
    const s = await open()
    const tight = (await s.accounts.ensure('0x4444444444444444444444444444444444444444', 'user', 1000)).account.id
    await s.accounts.deposit({ id: tight, amount: 1000n, ref: 'dep_tight', now: 1000 })
    await s.accounts.approve(tight, 300n)
    const holdOf = (requestId: string, amount: bigint, accountId = tight, owner = 'i1') =>
      s.ledger.hold({
        requestId,
        accountId,
        keyId: 'key_1',
        model: 'svc/atlas@1',
        amount,
        owner,
        now: 1000,
        expiresAt: 10_000,
      })
    const captureOf = (requestId: string, cost: bigint, accountId = tight) =>
      s.ledger.capture({
        requestId,
        cost,
        payeeId: ids.payee,
        fee: 0n,
        feeAccountId: ids.fees,
        now: 1000,
        usage: usageRecord(requestId, accountId, cost),
      })
    const counters = (accountId: number) =>
      s.db.selectFrom('owner_holds').select(['owner', 'held', 'open']).where('account_id', '=', accountId).execute()

    // One turn, more than the cap covers: admitted in order while they fit, the one that does not refused.
    const held = await Promise.all([holdOf('a', 100n), holdOf('b', 150n), holdOf('c', 100n), holdOf('d', 50n)])
    expect(held.map((h) => h.ok)).toEqual([true, true, false, true])
    const refused = held[2]!
    if (!refused.ok) expect(spendableOf(refused.account!)).toBe(50n)
    expect(await counters(tight)).toEqual([{ owner: 'i1', held: 300n, open: 3n }])

    // One turn: a hold asked first, the closes that free room for it after. Closes run first in a group.
    const turn = await Promise.all([
      holdOf('e', 100n),
      captureOf('a', 40n),
      captureOf('b', 150n),
      s.ledger.release('d', 1000, usageRecord('d', tight, 0n)),
      captureOf('c', 1n),
    ])
    expect(turn).toEqual([{ ok: true }, true, true, true, false])
    expect(await s.accounts.byId(tight)).toMatchObject({ balance: 810n, held: 100n, cap: 110n })
    expect(await counters(tight)).toEqual([{ owner: 'i1', held: 100n, open: 1n }])

    // The allowance lowered under the holds: the captures of one turn take the cap to nothing, never below.
    expect(await holdOf('f', 10n)).toEqual({ ok: true })
    await s.accounts.approve(tight, 30n)
    expect(await Promise.all([captureOf('e', 25n), captureOf('f', 10n)])).toEqual([true, true])
    expect(await s.accounts.byId(tight)).toMatchObject({ balance: 775n, held: 0n, cap: 0n })
    expect(await counters(tight)).toEqual([{ owner: 'i1', held: 0n, open: 0n }])

    // A sweep took the instance for dead: the closes of one turn find nothing held, and charge nothing.
    for (const id of ['s1', 's2']) expect(await holdOf(id, 10n, ids.other, 'i2')).toEqual({ ok: true })
    expect(await s.ledger.releaseOwnedBy(['i2'], 2000)).toBe(2)
    expect(await Promise.all([captureOf('s1', 5n, ids.other), captureOf('s2', 5n, ids.other)])).toEqual([false, false])
    for (const id of ['s1', 's2']) expect((await s.usage.get(ids.other, id))?.outcome).toBe('abandoned')
    expect(await s.accounts.byId(ids.other)).toMatchObject({ balance: 10n ** 9n, held: 0n })
    expect(await s.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
  })

  it("writes a request's row once in a turn that closes it twice, as the first close left it", async () => {
    const s = await open()
    const holdBy = (requestId: string, owner: string) =>
      s.ledger.hold({
        requestId,
        accountId: ids.other,
        keyId: 'key_1',
        model: 'svc/atlas@1',
        amount: 100n,
        owner,
        now: 1000,
        expiresAt: 10_000,
      })
    const expired = (requestId: string) =>
      s.ledger.release(requestId, 1000, usageRecord(requestId, ids.other, 0n, { outcome: 'expired' }))
    // The request's capture and a sweeper's release in one turn: the capture's row stands.
    expect(await holdBy('p', 'i1')).toEqual({ ok: true })
    expect(await Promise.all([capture(s, 'p', ids.other), expired('p')])).toEqual([true, false])
    expect(status('p')).toBe('captured')
    // The same after a sweep took the instance for dead: the close's row is what was served, abandoned, not the
    // release's.
    expect(await holdBy('q', 'i2')).toEqual({ ok: true })
    expect(await s.ledger.releaseOwnedBy(['i2'], 2000)).toBe(1)
    expect(await Promise.all([capture(s, 'q', ids.other), expired('q')])).toEqual([false, false])
    expect(status('q')).toBe('released')
    expect((await s.usage.get(ids.other, 'q'))?.outcome).toBe('abandoned')
    expect(await s.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
  })

  it("closes member by member when a counter holds less than the set, and refuses a dead instance's hold alone", async () => {
    const s = await open()
    for (const id of ['m', 'n']) expect(await hold(s, id)).toEqual({ ok: true })
    // One of the two holds counted out (as a recount does on Postgres): the counter and the account no longer hold it.
    await sql`UPDATE owner_holds SET held = held - 100, open = open - 1 WHERE owner = 'i1' AND account_id = ${ids.user}`.execute(
      s.db,
    )
    await sql`UPDATE accounts SET held = held - 100 WHERE id = ${ids.user}`.execute(s.db)
    expect(await Promise.all([capture(s, 'm'), capture(s, 'n')])).toEqual([true, false])
    expect(status('n')).toBe('released')
    expect(await s.accounts.byId(ids.user)).toMatchObject({ balance: 10n ** 9n - 40n, held: 0n })
    // A dead instance's hold fails alone; the rest of its turn goes through.
    expect(await s.ledger.releaseOwnedBy(['i1'], 2000)).toBe(0)
    await sql`INSERT INTO owner_holds (owner, account_id, held, open, dead) VALUES ('gone', ${ids.other}, 0, 0, 1)`.execute(
      s.db,
    )
    const dead = s.ledger.hold({
      requestId: 'o',
      accountId: ids.other,
      keyId: 'key_1',
      model: 'svc/atlas@1',
      amount: 100n,
      owner: 'gone',
      now: 1000,
      expiresAt: 10_000,
    })
    const turn = await Promise.allSettled([dead, hold(s, 'k', ids.other)])
    expect(turn.map((r) => r.status)).toEqual(['rejected', 'fulfilled'])
    expect((await s.accounts.byId(ids.other))!.held).toBe(100n)
  })

  it("commits beside the event loop's own transactions, never inside them", async () => {
    const s = await open()
    await serve(s, 'warm')
    const requests = Array.from({ length: 200 }, (_, i) => serve(s, `req_${i}`, i % 2 ? ids.user : ids.other))
    // A transaction that reads, lets time pass, writes, then fails: the ledger's groups wait for it and are not
    // rolled back with it.
    const batch = s.db.transaction().execute(async (trx) => {
      const before = await trx.selectFrom('accounts').select('id').where('id', '=', ids.user).executeTakeFirst()
      await new Promise((resolve) => setTimeout(resolve, 30))
      await trx.updateTable('accounts').set({ debt: 1n }).where('id', '=', before!.id).execute()
      throw new Error('rolled back')
    })
    const deposits = Array.from({ length: 20 }, (_, i) =>
      s.accounts.deposit({ id: ids.other, amount: 1n, ref: `dep_more_${i}`, now: 1000 }),
    )
    await expect(batch).rejects.toThrow('rolled back')
    expect(await Promise.all(requests)).toEqual(requests.map(() => true))
    await Promise.all(deposits)
    expect(await s.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
    expect((await s.accounts.byId(ids.user))!.debt).toBe(0n)
    const left = (await s.accounts.byId(ids.user))!.balance + (await s.accounts.byId(ids.other))!.balance
    expect(left).toBe(2n * 10n ** 9n + 20n - 201n * 40n)
    const captured = await s.db
      .selectFrom('holds')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'captured')
      .executeTakeFirstOrThrow()
    expect(Number(captured.n)).toBe(201)
  })

  it("counts holds against their key's rate limits in the hold's own transaction, refused ones first", async () => {
    const s = await open()
    const tight = (await s.accounts.ensure('0x5555555555555555555555555555555555555555', 'user', 1000)).account.id
    await s.accounts.deposit({ id: tight, amount: 1000n, ref: 'dep_rated', now: 1000 })
    await s.accounts.approve(tight, 250n)
    const rate = { minute: 7, limits: { rpm: 4, tpm: 1000 }, tokens: 100 }
    const holdOf = (requestId: string, amount: bigint, tokens = 100, minute = 7) =>
      s.ledger.hold({
        requestId,
        accountId: tight,
        keyId: 'key_rated',
        model: 'svc/atlas@1',
        amount,
        owner: 'i1',
        now: 1000,
        expiresAt: 10_000,
        rate: { ...rate, tokens, minute },
      })
    // One turn: the key's 4 requests a minute go to the first four; the third is counted though its account refuses it.
    const held = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((id, i) => holdOf(id, i === 2 ? 900n : 100n)))
    expect(held.map((h) => (h.ok ? 'ok' : h.reason))).toEqual([
      'ok',
      'ok',
      'insufficient',
      'insufficient',
      'rate_limit',
      'rate_limit',
    ])
    expect(held.map((h) => h.rate?.requests)).toEqual([1, 2, 3, 4, 4, 4])
    expect(held[5]!.rate).toEqual({ requests: 4, tokens: 400 })
    // Refused for its tokens alone in the next minute, counting nothing; the account held only what it admitted.
    const big = await holdOf('g', 1n, 1001, 8)
    expect(big).toMatchObject({ ok: false, reason: 'rate_limit', rate: { requests: 0, tokens: 0 } })
    expect(await s.accounts.byId(tight)).toMatchObject({ held: 200n })
    expect(await s.keyRates.peek('key_rated', 7)).toEqual({ requests: 4, tokens: 400 })
    expect(await s.keyRates.peek('key_rated', 8)).toEqual({ requests: 0, tokens: 0 })
    // A turn the limits have room for is counted in one write; each hold told the counts as if counted alone.
    const fit = await Promise.all([holdOf('i', 1n, 10, 9), holdOf('j', 1n, 20, 9), holdOf('k', 1n, 30, 9)])
    expect(fit.map((h) => [h.ok, h.rate])).toEqual([
      [true, { requests: 1, tokens: 10 }],
      [true, { requests: 2, tokens: 30 }],
      [true, { requests: 3, tokens: 60 }],
    ])
  })

  it('refuses to run a group inside a transaction left open on its connection', async () => {
    const s = await open()
    // Begun outside Kysely's transactions (as a failed rollback would leave one): a group nested in it would be a
    // savepoint, committed only with it, and its captures acknowledged as if they were on disk.
    await sql`BEGIN`.execute(s.db)
    await expect(hold(s, 'nested')).rejects.toThrow(/transaction open on its connection/)
    await sql`ROLLBACK`.execute(s.db)
    expect(await serve(s, 'after')).toBe(true)
    expect(status('nested')).toBe(null)
  })

  it('waits on timers while another process holds the write lock, not asleep on the event loop', async () => {
    const s = await open()
    // Another connection holds the write lock and lets go on a timer: a busy handler sleeping on the event loop
    // would keep that timer from ever firing, and the writes would fail after their whole timeout. The hold, the
    // capture and the store's own queries meet the lock in turn (they share one connection).
    const other = new BetterSqlite3(url.slice('sqlite:'.length))
    try {
      const writes = [
        () => hold(s, 'locked'),
        () => capture(s, 'locked'),
        () => s.accounts.approve(ids.user, 10n ** 8n),
      ]
      for (const write of writes) {
        other.exec('BEGIN IMMEDIATE')
        const started = performance.now()
        setTimeout(() => other.exec('COMMIT'), 50)
        expect(await write()).not.toEqual({ ok: false })
        expect(performance.now() - started).toBeGreaterThanOrEqual(45)
      }
      expect(status('locked')).toBe('captured')
      expect((await s.accounts.byId(ids.user))!).toMatchObject({ balance: 10n ** 9n - 40n, cap: 10n ** 8n })
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK')
      other.close()
    }
  })
})
