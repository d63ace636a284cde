import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from '../schema.js'
import type { RateLimits } from '../keys.js'
import { KeyRatesRepo } from '../key-rates.js'
import type { RateAnswer, RateCount } from '../../limits/counter.js'
import { sqliteRateOps } from './rate-ops.js'

/**
 * The store's rate counter on SQLite: the conditional upsert as a prepared statement on the ledger's own connection,
 * run at once (an implicit transaction). Inside a transaction of Kysely's on that connection, or when another process
 * holds the write lock, it takes the shared repository's way, which waits its turn. A gateway's takes go with their
 * holds instead (`HotLedger.countsRates`).
 */
export class SqliteKeyRates extends KeyRatesRepo {
  private readonly ops

  constructor(
    private readonly raw: BetterSqlite3.Database,
    db: Kysely<Database>,
  ) {
    super(db)
    this.ops = sqliteRateOps(raw)
  }

  override async take(keyId: string, minute: number, limits: RateLimits, tokens: number): Promise<RateAnswer> {
    if (this.raw.inTransaction) return super.take(keyId, minute, limits, tokens)
    try {
      return this.ops.take(keyId, { minute, limits, tokens })
    } catch (err) {
      if ((err as { code?: string }).code?.startsWith('SQLITE_BUSY')) return super.take(keyId, minute, limits, tokens)
      throw err
    }
  }

  override async peek(keyId: string, minute: number): Promise<RateCount> {
    return this.ops.peek(keyId, minute)
  }
}
