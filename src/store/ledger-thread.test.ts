import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import BetterSqlite3 from 'better-sqlite3'
import { sqliteLedgerOps, type LedgerOp } from './sqlite-ledger-ops.js'
import type { Store } from './store.js'
import type { SqliteLedgerThread } from './ledger-thread.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'

/** The SQLite file's ledger runs on its own thread and connection, beside the event loop's connection. */
describe('the ledger thread of a SQLite file', () => {
  let f: StoreFixture | undefined
  let store: Store
  beforeEach(async () => {
    f = await openFixture('sqlite')
    store = f.store
    for (const id of [f.user, f.other]) {
      await store.accounts.deposit(id, 10n ** 9n, `dep_${id}`, 1000)
      await store.accounts.approve(id, 10n ** 9n)
    }
  })
  afterEach(() => closeFixture(f))

  const serve = async (requestId: string, accountId: number) => {
    const held = await store.ledger.hold({ requestId, accountId, keyId: 'key_1', model: 'svc/atlas@1', amount: 100n, owner: 'i1', now: 1000, expiresAt: 10_000 })
    if (!held.ok) throw new Error(`hold refused: ${held.reason}`)
    return store.ledger.capture({ requestId, cost: 40n, payeeId: f!.payee, fee: 2n, feeAccountId: f!.fees, now: 1000, usage: usageRecord(requestId, accountId, 40n) })
  }

  it("commits beside the event loop's own transactions, which read before they write, without SQLITE_BUSY", async () => {
    await serve('warm', f!.user)
    const requests = Array.from({ length: 200 }, (_, i) => serve(`req_${i}`, i % 2 ? f!.user : f!.other))
    // A transaction that reads, lets time pass (here: a timer; under load: the thread runs on another core), then
    // writes. Begun deferred, it would fail with SQLITE_BUSY_SNAPSHOT once the thread committed in between.
    const batch = store.db.transaction().execute(async (trx) => {
      const before = await trx.selectFrom('accounts').select('id').where('id', '=', f!.user).executeTakeFirst()
      await new Promise((resolve) => setTimeout(resolve, 30))
      await trx.updateTable('accounts').set({ cap: 10n ** 9n }).where('id', '=', before!.id).execute()
    })
    const deposits = Array.from({ length: 20 }, (_, i) => store.accounts.deposit(f!.other, 1n, `dep_more_${i}`, 1000))
    await batch
    expect(await Promise.all(requests)).toEqual(requests.map(() => true))
    await Promise.all(deposits)
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
    const left = (await store.accounts.byId(f!.user))!.balance + (await store.accounts.byId(f!.other))!.balance
    expect(left).toBe(2n * 10n ** 9n + 20n - 201n * 40n)
  })

  it('sends what a dead thread had in flight to a new one, which charges each request exactly once', async () => {
    await serve('warm', f!.user)
    const thread = (store as unknown as { hot: SqliteLedgerThread }).hot
    const before = (await store.accounts.byId(f!.user))!.balance
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {})
    let served = 0
    // Killed at different moments: before its group, inside it (rolled back), or after the commit but before the answer.
    for (const delayMs of [0, 1, 2, 3, 5, 8]) {
      const inFlight = Array.from({ length: 40 }, (_, i) => serve(`kill_${delayMs}_${i}`, f!.user))
      await new Promise((resolve) => setTimeout(resolve, delayMs))
      await thread['worker']?.terminate()
      expect(await Promise.all(inFlight)).toEqual(inFlight.map(() => true))
      served += inFlight.length
    }
    // At least one kill found operations in flight (the rest may have landed between batches).
    expect(logged.mock.calls.some(([m]) => /operations in flight; sent to a new thread/.test(String(m)))).toBe(true)
    logged.mockRestore()
    expect((await store.accounts.byId(f!.user))!.balance).toBe(before - BigInt(served) * 40n)
    const captured = await store.db.selectFrom('holds').select((eb) => eb.fn.countAll<number>().as('n')).where('request_id', 'like', 'kill_%').where('status', '=', 'captured').executeTakeFirstOrThrow()
    expect(Number(captured.n)).toBe(served)
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })

  it('answers a replay of an operation that had committed from what it wrote, without doing it twice', async () => {
    const raw = new BetterSqlite3(f!.url.slice('sqlite:'.length))
    raw.defaultSafeIntegers(true)
    try {
      const ledger = sqliteLedgerOps(raw)
      const hold: LedgerOp = { kind: 'hold', hold: { requestId: 'twice', accountId: f!.user, keyId: 'key_1', model: 'svc/atlas@1', amount: 100n, owner: 'i1', now: 1000, expiresAt: 10_000 } }
      const capture: LedgerOp = { kind: 'capture', capture: { requestId: 'twice', cost: 40n, payeeId: f!.payee, fee: 2n, feeAccountId: f!.fees, now: 1000, usage: usageRecord('twice', f!.user, 40n) } }
      const balance = async () => (await store.accounts.byId(f!.user))!
      expect(ledger.runGroup([hold])).toEqual([{ ok: true, value: { ok: true } }])
      expect(ledger.runGroup([{ ...hold, replay: true }])).toEqual([{ ok: true, value: { ok: true } }])
      expect((await balance()).held).toBe(100n)
      expect(ledger.runGroup([capture])).toEqual([{ ok: true, value: true }])
      expect(ledger.runGroup([{ ...capture, replay: true }])).toEqual([{ ok: true, value: true }])
      // Not replays: a second hold of the same request fails, a second capture finds its hold closed.
      expect(ledger.runGroup([hold])[0]!.ok).toBe(false)
      expect(ledger.runGroup([capture])).toEqual([{ ok: true, value: false }])
      expect((await balance()).held).toBe(0n)
      expect((await balance()).balance).toBe(10n ** 9n - 40n)
      expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
    } finally {
      raw.close()
    }
  })

  it("waits for a locked database on timers, not asleep on the event loop", async () => {
    // Another connection of this thread holds the write lock and lets go on a timer: a busy handler sleeping on the
    // event loop would keep that timer from ever firing, and the write would fail after its whole timeout.
    const other = new BetterSqlite3(f!.url.slice('sqlite:'.length))
    try {
      other.exec('BEGIN IMMEDIATE')
      const started = performance.now()
      setTimeout(() => other.exec('COMMIT'), 50)
      await store.accounts.approve(f!.user, 123n)
      expect(performance.now() - started).toBeGreaterThanOrEqual(45)
      expect((await store.accounts.byId(f!.user))!.cap).toBe(123n)
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK')
      other.close()
    }
  })
})
