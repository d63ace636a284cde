import { sql, type Kysely, type SqlBool } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Every hold writes two postings and every capture up to five; an index entry of each, by account, is one more page
 * per account in a group's commit (about a third of the pages a group of holds and captures writes with many
 * accounts). Only the books no account row caches are read by account: a payee's pending earnings and settlement
 * postings (a payer's available and held are its row's balance and held, and the audit reads all postings at once).
 * The index now holds those postings alone; hold, release and capture postings are no longer indexed.
 * The predicate is the query's too (`UNCACHED_POSTINGS` in accounts.ts, written out here: a
 * migration does not change with the code): a partial index is used only by a query
 * whose WHERE contains its condition, written the same way.
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
