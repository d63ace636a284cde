import type { Kysely } from 'kysely'
import type { Database } from '../schema.js'
import type { SummaryQuery } from '../dialect.js'
import type { UsageSummary } from '../usage-types.js'

/**
 * An account's usage summary on Postgres: the repository's two whole queries (totals, days), which Postgres runs off
 * the event loop however long the history (SQLite reads it in slices instead).
 */
export function wholeSummary(_db: Kysely<Database>, q: SummaryQuery): Promise<UsageSummary> {
  return q.whole()
}
