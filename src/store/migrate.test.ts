import { describe, expect, it } from 'vitest'
import { openStore } from './open.js'
import BetterSqlite3 from 'better-sqlite3'
import { freshSqliteUrl } from '../../test/helpers/stores.js'
import { usageRecord } from '../../test/helpers/store-fixture.js'
import { legacyLedger, olderSqliteStore } from '../../test/helpers/older-store.js'

describe('migrations 006 and 007 on a SQLite file written before them', () => {
  it('keeps every posting and its id, and appends after them without AUTOINCREMENT', async () => {
    const url = freshSqliteUrl()
    const raw = new BetterSqlite3(url.slice('sqlite:'.length))
    // The schema as 001–005 left it, with postings in it.
    const older = await olderSqliteStore(url, '008_rowid_request_rows')
    const user = (await older.accounts.ensure('0x1111111111111111111111111111111111111111', 'user', 1000)).account.id
    await older.accounts.deposit({ id: user, amount: 500n, ref: 'dep_1', now: 1000 })
    await older.close()
    raw.exec(`
      CREATE TABLE postings_old (id integer primary key autoincrement, ref text not null, account_id integer not null references accounts(id), book text not null, kind text not null, amount integer not null, created_at integer not null);
      INSERT INTO postings_old SELECT * FROM postings; DROP TABLE postings; ALTER TABLE postings_old RENAME TO postings;
      CREATE INDEX postings_account ON postings (account_id, book);
      DELETE FROM kysely_migration WHERE name IN ('006_appended_postings', '007_uncached_postings', '008_rowid_request_rows');`)
    const before = raw.prepare('SELECT * FROM postings ORDER BY id').all()
    expect(before.length).toBe(2)

    const store = await openStore(url)
    await store.accounts.deposit({ id: user, amount: 7n, ref: 'dep_2', now: 2000 })
    const after = raw.prepare('SELECT * FROM postings ORDER BY id').all() as { id: number; ref: string }[]
    expect(after.slice(0, 2)).toEqual(before)
    expect(after.slice(2).map((p) => p.ref)).toEqual(['dep_2', 'dep_2'])
    expect(after[2]!.id).toBeGreaterThan(after[1]!.id)
    expect(raw.prepare(`SELECT sql FROM sqlite_schema WHERE name = 'postings'`).pluck().get()).not.toMatch(
      /autoincrement/i,
    )
    // Migration 007 replaced 006's index on account_id by a partial one (the uncached books alone).
    expect(raw.prepare(`SELECT name FROM pragma_index_info('postings_uncached')`).pluck().all()).toEqual(['account_id'])
    expect(raw.prepare(`SELECT count(*) FROM sqlite_schema WHERE name = 'postings_account'`).pluck().get()).toBe(0)
    expect((await store.accounts.books(user)).available).toBe(507n)
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
    await store.close()
    raw.close()
  })
})

describe('migration 008 on a SQLite file written before it', () => {
  // The two tables and their indexes as migrations 001–007 left them, written out: what 008 must turn them from.
  const BEFORE_008 = `
    CREATE TABLE holds_old (
      request_id text NOT NULL PRIMARY KEY, account_id integer NOT NULL REFERENCES accounts(id), key_id text NOT NULL,
      model text NOT NULL, amount integer NOT NULL, status text NOT NULL, owner text NOT NULL, created_at integer NOT NULL,
      expires_at integer NOT NULL, closed_at integer, cost integer, payee_id integer, fee integer, batch_id text
    ) WITHOUT ROWID;
    INSERT INTO holds_old SELECT request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at, closed_at, cost, payee_id, fee, batch_id FROM holds;
    DROP TABLE holds; ALTER TABLE holds_old RENAME TO holds;
    CREATE TABLE usage_old (
      request_id text NOT NULL PRIMARY KEY, account_id integer NOT NULL REFERENCES accounts(id), key_id text NOT NULL,
      model text NOT NULL, served_model text, provider text, stream integer NOT NULL, prompt_tokens integer NOT NULL,
      completion_tokens integer NOT NULL, upstream_prompt_tokens integer, upstream_completion_tokens integer,
      cost integer NOT NULL, outcome text NOT NULL, latency_ms integer NOT NULL, created_at integer NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO usage_old SELECT request_id, account_id, key_id, model, served_model, provider, stream, prompt_tokens, completion_tokens, upstream_prompt_tokens, upstream_completion_tokens, cost, outcome, latency_ms, created_at FROM usage;
    DROP TABLE usage; ALTER TABLE usage_old RENAME TO usage;`
  const INDEXES = [
    `CREATE INDEX "holds_batched" on "holds" ("batch_id") where "batch_id" is not null`,
    `CREATE INDEX "holds_open" on "holds" ("owner", "expires_at") where "status" = 'open'`,
    `CREATE INDEX "holds_payee" on "holds" ("payee_id") where "payee_id" is not null`,
    `CREATE INDEX "holds_unbatched" on "holds" ("account_id") where ("status" = 'captured' and "batch_id" is null)`,
    `CREATE INDEX "usage_account_time" on "usage" ("account_id", "created_at")`,
  ]

  it('keeps every hold and usage row in rowid tables, with the same indexes and keys; 009 keeps every usage record, 010 every posting', async () => {
    const url = freshSqliteUrl()
    const older = await olderSqliteStore(url, '008_rowid_request_rows')
    const raw = new BetterSqlite3(url.slice('sqlite:'.length))
    raw.defaultSafeIntegers(true)
    const user = (await older.accounts.ensure('0x1111111111111111111111111111111111111111', 'user', 1000)).account.id
    const payee = (await older.accounts.ensure('0x2222222222222222222222222222222222222222', 'provider', 1000)).account
      .id
    await older.accounts.deposit({ id: user, amount: 500n, ref: 'dep_1', now: 1000 })
    await older.accounts.approve(user, 500n)
    const ledger = legacyLedger(older.raw, user, 1000)
    for (const id of ['r1', 'r2', 'r3']) ledger.hold(id, 100n, 'i1')
    ledger.capture('r1', 100n, 40n, payee)
    ledger.refuse('r0')
    raw.exec(BEFORE_008)
    for (const sql of INDEXES) raw.exec(sql)
    raw.exec(`DELETE FROM kysely_migration WHERE name = '008_rowid_request_rows'`)
    await older.close()
    const tableSql = (table: string) =>
      raw.prepare(`SELECT sql FROM sqlite_schema WHERE name = ?`).pluck().get(table) as string
    const rows = (table: string) => raw.prepare(`SELECT * FROM ${table} ORDER BY request_id`).all()
    const keys = (table: string) =>
      raw.prepare(`SELECT "from", "table", "to" FROM pragma_foreign_key_list(?)`).all(table)
    const before = { holds: rows('holds'), usage: rows('usage') }
    expect(before.holds).toHaveLength(3)
    expect(before.usage).toHaveLength(2)
    expect(tableSql('holds')).toMatch(/without rowid/i)

    const at008 = await olderSqliteStore(url, '008_rowid_request_rows')
    for (const table of ['holds', 'usage']) {
      expect(tableSql(table)).not.toMatch(/without rowid/i)
      expect(keys(table)).toEqual([{ from: 'account_id', table: 'accounts', to: 'id' }])
    }
    expect({ holds: rows('holds'), usage: rows('usage') }).toEqual(before)
    expect(
      raw
        .prepare(
          `SELECT sql FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('holds', 'usage') AND sql IS NOT NULL ORDER BY name`,
        )
        .pluck()
        .all(),
    ).toEqual(INDEXES)
    await at008.close()

    const postings = () =>
      raw
        .prepare(
          'SELECT id, ref, account_id, book, kind, amount, created_at FROM postings WHERE id IS NOT NULL ORDER BY id',
        )
        .all()
    const posted = postings()
    expect(posted.length).toBeGreaterThan(6)

    // 009: usage becomes a view over the requests' rows; it lists the same records. 010: so do postings, where every
    // posting written before it is still a row, with its id.
    const store = await openStore(url)
    expect(tableSql('postings')).toMatch(/^CREATE VIEW/)
    expect(postings()).toEqual(posted)
    expect(rows('usage')).toEqual(before.usage)
    expect(tableSql('usage')).toMatch(/^CREATE VIEW/)
    expect((await store.usage.list(user, { limit: 10 })).map((u) => [u.requestId, u.outcome, u.cost])).toEqual([
      ['r1', 'completed', 40n],
      ['r0', 'insufficient_quota', 0n],
    ])
    // The older version's open holds are still rows: owned by no registered instance, a sweep releases them.
    expect(await store.ledger.openHolds()).toBe(2)
    expect(await store.ledger.releaseUnregistered(2000)).toBe(2)
    expect((await store.usage.get(user, 'r2'))?.outcome).toBe('abandoned')
    // And the ledger goes on, with today's rows.
    expect(
      await store.ledger.hold({
        requestId: 'r4',
        accountId: user,
        keyId: 'key_1',
        model: 'svc/atlas@1',
        amount: 100n,
        owner: 'i2',
        now: 2000,
        expiresAt: 9_000,
      }),
    ).toEqual({ ok: true })
    expect(
      await store.ledger.capture({
        requestId: 'r4',
        cost: 30n,
        payeeId: payee,
        fee: 0n,
        feeAccountId: (await store.accounts.byAddress('svc:fees'))!.id,
        now: 2001,
        usage: usageRecord('r4', user, 30n),
      }),
    ).toBe(true)
    expect((await store.accounts.books(user)).available).toBe(430n)
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
    // Today's request is one row, and its postings are derived from it; the rows written before are untouched.
    expect(raw.prepare(`SELECT book, kind, amount FROM postings WHERE ref = 'r4'`).all()).toEqual([
      { book: 'held', kind: 'hold', amount: 100n },
      { book: 'available', kind: 'hold', amount: -100n },
      { book: 'held', kind: 'release', amount: -70n },
      { book: 'available', kind: 'release', amount: 70n },
      { book: 'held', kind: 'capture', amount: -30n },
      { book: 'pending', kind: 'payout', amount: 30n },
    ])
    expect(raw.prepare(`SELECT count(*) FROM posting_rows WHERE ref = 'r4'`).pluck().get()).toBe(0n)
    expect(postings().slice(0, posted.length)).toEqual(posted)
    await store.close()
    raw.close()
  })
})
