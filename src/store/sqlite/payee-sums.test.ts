import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Database from 'better-sqlite3'
import { CompiledQuery, sql } from 'kysely'
import { SettlementRepo } from '../settlement.js'
import { postingsSliceQuery, rowsSliceQuery } from './payee-sums.js'
import { sqliteDialect } from './dialect.js'
import { postgresDialect } from '../postgres/dialect.js'
import type { Store } from '../store.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../../test/helpers/store-fixture.js'
import { turnsDuring } from '../../../test/helpers/turns.js'

describe("a payee's sums on SQLite, folded from its request rows and written postings", () => {
  let f: StoreFixture | undefined
  let store: Store
  /** The sums read whole, from every row, as Postgres reads them: the reference. */
  let whole: SettlementRepo
  let requestNo = 0

  beforeAll(async () => {
    f = await openFixture('sqlite')
    store = f.store
    whole = new SettlementRepo(store.db, postgresDialect)
    await store.accounts.deposit({ id: f.user, amount: 1_000_000n, ref: 'dep_1', now: 1000 })
    await store.accounts.approve(f.user, 1_000_000n)
  })
  afterAll(() => closeFixture(f))

  /** A request held and then captured for `payee` (released when `cost` is undefined). */
  async function request(payee: number, cost: bigint | undefined, fee = 0n) {
    const requestId = `r${++requestNo}`
    const accountId = f!.user
    expect(
      await store.ledger.hold({
        requestId,
        accountId,
        keyId: 'key_1',
        model: 'm',
        amount: 100n,
        owner: 'i1',
        now: 1000,
        expiresAt: 99_999,
      }),
    ).toEqual({ ok: true })
    if (cost === undefined)
      return void (await store.ledger.release(requestId, 1001, usageRecord(requestId, accountId, 0n)))
    expect(
      await store.ledger.capture({
        requestId,
        cost,
        payeeId: payee,
        fee,
        feeAccountId: f!.fees,
        now: 1001,
        usage: usageRecord(requestId, accountId, cost),
      }),
    ).toBe(true)
  }

  /**
   * A request closed before migration 010, as that migration left it: its row not posted, its postings written as rows
   * (the payee's payout and the fee account's fee pending). `feeAccount`: a row that names its fee account all the
   * same (a posted row's arm must not count it).
   */
  async function olderRequest(payee: number, cost: bigint, fee: bigint, feeAccount: number | null = null) {
    const requestId = `old${++requestNo}`
    await sql`INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at, closed_at, cost, payee_id,
      fee, posted, fee_account_id) VALUES (${requestId}, ${f!.user}, 'key_1', 'm', 100, 'captured', 'i0', 900, 9000, 901, ${cost}, ${payee}, ${fee}, 0,
      ${feeAccount})`.execute(store.db)
    await sql`INSERT INTO posting_rows (ref, account_id, book, kind, amount, created_at) VALUES (${requestId}, ${payee}, 'pending', 'payout',
      ${cost - fee}, 901), (${requestId}, ${f!.fees}, 'pending', 'fee', ${fee}, 901)`.execute(store.db)
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
    const folded = new SettlementRepo(store.db, sqliteDialect, 3)
    await matches(folded)
    await olderRequest(f!.payee, 30n, 3n)
    await olderRequest(f!.payee, 20n, 2n, f!.fees)
    for (let i = 0; i < 7; i++) await request(f!.payee, 40n + BigInt(i), 2n)
    await request(f!.payee, undefined)
    await request(f!.other, 25n)
    await matches(folded)
    expect(await folded.payeeEarnings(f!.payee)).toEqual({ requests: 9, gross: 351n, earned: 332n })
    expect(await folded.payeeTotals(f!.payee)).toEqual({ pending: 332n, settled: 0n })
    expect((await folded.payeeTotals(f!.fees)).pending).toBe(19n)

    // A settlement moves the payees' pending to settled; requests after it are pending again.
    expect(await store.settlement.createBatch({ id: 'b1', feeAccountId: f!.fees, now: 2000 })).not.toBeNull()
    expect(await store.settlement.markSettled('b1', 2001)).toBe(true)
    for (let i = 0; i < 5; i++) await request(i % 2 ? f!.payee : f!.other, 10n, 1n)
    await matches(folded)
    expect(await folded.payeeTotals(f!.payee)).toEqual({ pending: 18n, settled: 332n })
    // A repository that never read them folds them all at once, and reads alike.
    await matches(new SettlementRepo(store.db, sqliteDialect))
  })

  it('are read alike by reads at once, each going on from where the others stopped', async () => {
    const folded = new SettlementRepo(store.db, sqliteDialect, 2)
    const reads = await Promise.all([
      folded.payeeTotals(f!.payee),
      folded.payeeEarnings(f!.payee),
      folded.payeeTotals(f!.payee),
      folded.payeeTotals(f!.fees),
    ])
    expect(reads).toEqual([
      await whole.payeeTotals(f!.payee),
      await whole.payeeEarnings(f!.payee),
      await whole.payeeTotals(f!.payee),
      await whole.payeeTotals(f!.fees),
    ])
  })

  it('reads each slice through the payee, fee and uncached-postings indexes, by rowid', async () => {
    const plan = async (q: { compile: (db: Store['db']) => CompiledQuery }) => {
      const c = q.compile(store.db)
      return (
        await store.db.executeQuery<{ detail: string }>(
          CompiledQuery.raw(`EXPLAIN QUERY PLAN ${c.sql}`, [...c.parameters]),
        )
      ).rows
        .map((r) => r.detail)
        .join('\n')
    }
    const rows = await plan(rowsSliceQuery(f!.payee, 100, 200))
    for (const index of ['holds_payee', 'holds_fee'])
      expect(rows).toMatch(new RegExp(`USING INDEX ${index} \\(\\w+=\\? AND rowid>\\? AND rowid<\\?\\)`))
    expect(await plan(postingsSliceQuery(f!.payee, 100, 200))).toMatch(
      /USING INDEX postings_uncached \(account_id=\? AND rowid>\? AND rowid<\?\)/,
    )
    expect(rows).not.toMatch(/SCAN holds\b/)
  })

  it("reads a payee's newest batches from its index by batch, never every leg", async () => {
    const q = store.settlement.paidBatchesQuery(f!.payee, 20).compile()
    const plan = (
      await store.db.executeQuery<{ detail: string }>(
        CompiledQuery.raw(`EXPLAIN QUERY PLAN ${q.sql}`, [...q.parameters]),
      )
    ).rows
      .map((r) => r.detail)
      .join('\n')
    expect(plan).toMatch(/SEARCH batch_legs USING INDEX batch_legs_payee \(payee_id=\?\)/)
    expect(plan).not.toMatch(/TEMP B-TREE|SCAN batch_legs/)
  })

  it('reads a payee of many rows for the first time a slice at a time, the event loop free between them', async () => {
    // 40,000 captured rows of one payee, written straight to the file: ten slices.
    const raw = new Database(f!.url.slice('sqlite:'.length))
    const insert =
      raw.prepare(`INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at,
      closed_at, cost, payee_id, fee, posted, fee_account_id) VALUES (?, ?, 'key_1', 'm', 100, 'captured', 'i1', 1000, 99999, 1001, 10, ?, 1, 1, ?)`)
    raw.transaction(() => {
      for (let i = 0; i < 40_000; i++) insert.run(`bulk_${i}`, f!.user, f!.payee, f!.fees)
    })()
    raw.close()
    const folded = new SettlementRepo(store.db, sqliteDialect)
    let read: unknown
    const turns = await turnsDuring(async () => (read = await folded.payeeEarnings(f!.payee)))
    expect(read).toEqual(await whole.payeeEarnings(f!.payee))
    // Slices of 4,096 rowids: ten, nine turns between them (the bound written out, not read from the code it checks).
    expect(turns).toBeGreaterThanOrEqual(8)
    // Read whole, it holds the loop throughout; read again, only the rows since are folded.
    expect(await turnsDuring(() => whole.payeeEarnings(f!.payee))).toBeLessThanOrEqual(1)
    expect(await turnsDuring(() => folded.payeeEarnings(f!.payee))).toBeLessThanOrEqual(1)
    await matches(folded)
  })
})
