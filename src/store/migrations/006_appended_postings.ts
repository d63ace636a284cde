import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Postings appended with fewer pages touched: on SQLite a plain rowid instead of AUTOINCREMENT, and postings indexed by
 * account alone instead of (account_id, book). Why: docs/architecture.md §15.22.
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
