import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from '../schema.js'
import { KeyRatesRepo } from '../key-rates.js'
import type { RateCount } from '../../limits/counter.js'
import { sqliteRateOps } from './rate-ops.js'

/**
 * The store's rate counter on SQLite. A gateway's takes go with their holds (`HoldRequest.rate`), so `take` is the
 * shared repository's; a peek is a prepared statement on the ledger's own connection.
 */
export class SqliteKeyRates extends KeyRatesRepo {
  private readonly ops

  constructor(raw: BetterSqlite3.Database, db: Kysely<Database>) {
    super(db)
    this.ops = sqliteRateOps(raw)
  }

  override async peek(keyId: string, minute: number): Promise<RateCount> {
    return this.ops.peek(keyId, minute)
  }
}
