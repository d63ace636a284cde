import { sql, type Kysely, type SqlBool } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Only the books no account row caches (a payee's pending and settlement postings) stay indexed by account. The
 * partial index's predicate is `UNCACHED_POSTINGS` (accounts.ts) written out the same way, or the query would not use
 * it (docs/architecture.md §15.22).
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.dropIndex('postings_account').ifExists().execute()
  await db.schema
    .createIndex('postings_uncached')
    .on('postings')
    .column('account_id')
    .where(sql.raw<SqlBool>(`book = 'pending' OR kind = 'settlement'`))
    .execute()
}
