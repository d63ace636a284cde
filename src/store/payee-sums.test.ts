import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Database from 'better-sqlite3'
import { CompiledQuery } from 'kysely'
import { SettlementRepo } from './settlement.js'
import { sliceQuery } from './payee-sums.js'
import type { Store } from './store.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'
import { stallsOf } from '../../test/helpers/stall.js'


describe("a payee's sums on SQLite, folded from its request rows", () => {
  let f: StoreFixture | undefined
  let store: Store
  /** The sums read whole, from every row, as Postgres reads them: the reference. */
  let whole: SettlementRepo
  let requestNo = 0

  beforeAll(async () => {
    f = await openFixture('sqlite')
    store = f.store
    whole = new SettlementRepo(store.db, 'postgres')
    await store.accounts.deposit(f.user, 1_000_000n, 'dep_1', 1000)
    await store.accounts.approve(f.user, 1_000_000n)
  })
  afterAll(() => closeFixture(f))

  /** A request held and then captured for `payee` (released when `cost` is undefined). */
  async function request(payee: number, cost: bigint | undefined, fee = 0n) {
    const requestId = `r${++requestNo}`
    const accountId = f!.user
    expect(await store.ledger.hold({ requestId, accountId, keyId: 'key_1', model: 'm', amount: 100n, owner: 'i1', now: 1000, expiresAt: 99_999 })).toEqual({ ok: true })
    if (cost === undefined) return void (await store.ledger.release(requestId, 1001, usageRecord(requestId, accountId, 0n)))
    expect(await store.ledger.capture({ requestId, cost, payeeId: payee, fee, feeAccountId: f!.fees, now: 1001, usage: usageRecord(requestId, accountId, cost) })).toBe(true)
  }

  /** Each account's figures read by `repo` are those read whole. */
  async function matches(repo: SettlementRepo) {
    for (const account of [f!.payee, f!.other, f!.fees, f!.user]) {
      expect(await repo.payeeEarnings(account), `earnings of ${account}`).toEqual(await whole.payeeEarnings(account))
      expect(await repo.payeeTotals(account), `totals of ${account}`).toEqual(await whole.payeeTotals(account))
    }
  }

  it('are those read whole, as rows are added, settled and read in slices of a few rows', async () => {
    // Three rowids per statement: every read below folds in several slices, and goes on from where the last stopped.
    const folded = new SettlementRepo(store.db, 'sqlite', 3)
    await matches(folded)
    for (let i = 0; i < 7; i++) await request(f!.payee, 40n + BigInt(i), 2n)
    await request(f!.payee, undefined)
    await request(f!.other, 25n)
    await matches(folded)
    expect(await folded.payeeEarnings(f!.payee)).toEqual({ requests: 7, gross: 301n, earned: 287n })
    expect((await folded.payeeTotals(f!.fees)).pending).toBe(14n)

    // A settlement moves the payees' pending to settled; requests after it are pending again.
    expect(await store.settlement.createBatch('b1', f!.fees, 2000)).not.toBeNull()
    expect(await store.settlement.markSettled('b1', 2001)).toBe(true)
    for (let i = 0; i < 5; i++) await request(i % 2 ? f!.payee : f!.other, 10n, 1n)
    await matches(folded)
    expect(await folded.payeeTotals(f!.payee)).toEqual({ pending: 18n, settled: 287n })
    // A repository that never read them folds them all at once, and reads alike.
    await matches(new SettlementRepo(store.db, 'sqlite'))
  })

  it('reads each slice through the payee and fee indexes, by rowid', async () => {
    const q = sliceQuery(f!.payee, 100, 200).compile(store.db)
    const plan = (await store.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`EXPLAIN QUERY PLAN ${q.sql}`, [...q.parameters]))).rows.map((r) => r.detail).join('\n')
    for (const index of ['holds_payee', 'holds_fee']) expect(plan).toMatch(new RegExp(`USING INDEX ${index} \\(\\w+=\\? AND rowid>\\? AND rowid<\\?\\)`))
    expect(plan).not.toMatch(/SCAN holds\b/)
  })

  it('reads a payee of many rows for the first time without holding the event loop for the whole read', async () => {
    // 120,000 captured rows of one payee, written straight to the file.
    const raw = new Database(f!.url.slice('sqlite:'.length))
    const insert = raw.prepare(`INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at,
      closed_at, cost, payee_id, fee, posted, fee_account_id) VALUES (?, ?, 'key_1', 'm', 100, 'captured', 'i1', 1000, 99999, 1001, 10, ?, 1, 1, ?)`)
    raw.transaction(() => {
      for (let i = 0; i < 120_000; i++) insert.run(`bulk_${i}`, f!.user, f!.payee, f!.fees)
    })()
    raw.close()
    // Read once unmeasured, as they must agree: the bulk write's aftermath (its checkpoint, the collection of its
    // garbage) falls there.
    const folded = new SettlementRepo(store.db, 'sqlite')
    expect(await folded.payeeEarnings(f!.payee)).toEqual(await whole.payeeEarnings(f!.payee))
    // Each time folded from the first row, by a repository that never read it. A slice is 4,096 rowids, about a
    // thirtieth of the rows: well under a third of the whole read's stall.
    const stalls = await stallsOf(() => whole.payeeEarnings(f!.payee), () => new SettlementRepo(store.db, 'sqlite').payeeEarnings(f!.payee))
    expect(stalls.sliced, `whole ${stalls.whole.toFixed(1)} ms`).toBeLessThan(stalls.whole / 3)
    await matches(folded)
  })
})
