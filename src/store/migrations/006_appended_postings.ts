import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Every ledger group appends postings, and each page it touches is a page written to the WAL at commit:
 * - on SQLite, `AUTOINCREMENT` kept a `sqlite_sequence` row, one more page per transaction; postings are never
 *   deleted, so a plain rowid (the largest plus one) is just as monotonic;
 * - the index on (account_id, book) kept an account's books apart, so a request's postings went to two places
 *   inside each account's run, where SQLite splits and rebalances sibling pages: indexed by account alone, an
 *   account's new postings all go to the end of its run. The per-account sums read the book from the row.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') return reindex(db)
  // Kysely runs SQLite's DDL statement by statement: one transaction, or a crash between the copy and the rename
  // would leave a store that cannot start (or has no postings table).
  await db.transaction().execute(async (trx) => {
    await sql
      .raw(
        `CREATE TABLE postings_plain (
      id integer NOT NULL PRIMARY KEY, ref text NOT NULL, account_id integer NOT NULL REFERENCES accounts(id),
      book text NOT NULL, kind text NOT NULL, amount integer NOT NULL, created_at integer NOT NULL
    )`,
      )
      .execute(trx)
    await sql
      .raw(
        'INSERT INTO postings_plain (id, ref, account_id, book, kind, amount, created_at) SELECT id, ref, account_id, book, kind, amount, created_at FROM postings',
      )
      .execute(trx)
    await sql.raw('DROP TABLE postings').execute(trx)
    await sql.raw('ALTER TABLE postings_plain RENAME TO postings').execute(trx)
    await reindex(trx)
  })
}

async function reindex(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('postings_account').ifExists().execute()
  await db.schema.createIndex('postings_account').on('postings').column('account_id').execute()
}
