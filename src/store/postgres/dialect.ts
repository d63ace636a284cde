import { sql } from 'kysely'
import type { StoreDialect } from '../dialect.js'
import { wholeSummary } from './usage-summary.js'
import { wholePayeeSums } from './payee-sums.js'

/**
 * The store on Postgres. Transactions of many connections write at once: one locks the rows it must not see change
 * (`FOR UPDATE`, the account row first, as the hot ledger does), and bounds its waits where others wait behind it.
 * Queries run off the event loop: histories are read whole, in one statement.
 */
export const postgresDialect: StoreDialect = {
  name: 'postgres',
  forUpdate: (q) => q.forUpdate(),
  lockAccount: async (trx, accountId) => {
    await trx.selectFrom('accounts').select('id').where('id', '=', accountId).forUpdate().execute()
  },
  boundStatements: async (trx, ms) => {
    await sql`SET LOCAL statement_timeout = ${sql.lit(ms)}`.execute(trx)
  },
  readOnlySnapshot: (db) => db.transaction().setAccessMode('read only').setIsolationLevel('repeatable read'),
  usageSummary: wholeSummary,
  payeeSums: (_db, q) => wholePayeeSums(q),
}
