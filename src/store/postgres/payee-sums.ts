import type { PayeeSums } from '../batch-types.js'
import type { PayeeSumsReader } from '../dialect.js'

/**
 * Payees' sums on Postgres: read whole each time (the repository's queries, through the indexes of uncached postings
 * and of request rows by payee and fee), off the event loop; nothing kept per process (SQLite folds them forward).
 */
export function wholePayeeSums(q: { whole: (accountId: number) => Promise<PayeeSums> }): PayeeSumsReader {
  return { of: q.whole }
}
