import type { StoreDialect } from '../dialect.js'
import { slicedSummary } from './usage-summary.js'
import { FoldedPayeeSums } from './payee-sums.js'

/**
 * The store on SQLite. A writing transaction begins IMMEDIATE (patient-dialect.ts) and so holds the database's write
 * lock from its start: nothing is locked row by row. better-sqlite3 runs every statement on the event loop: a long
 * history is read in slices (usage) or folded forward (payees' sums), never in one statement.
 */
export const sqliteDialect: StoreDialect = {
  name: 'sqlite',
  forUpdate: (q) => q,
  lockAccount: async () => {},
  boundStatements: async () => {},
  readOnlySnapshot: (db) => db.transaction().setAccessMode('read only'),
  usageSummary: (db, { accountId, filter, since }) => slicedSummary(db, { accountId, filter, since }),
  payeeSums: (db, { sliceRows }) => new FoldedPayeeSums(db, sliceRows),
}
