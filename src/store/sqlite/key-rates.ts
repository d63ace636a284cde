import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from '../schema.js'
import type { RateLimits } from '../keys.js'
import { KeyRatesRepo, TAKE_SQL, takeValues } from '../key-rates.js'
import { num } from '../ints.js'
import type { RateAnswer, RateCount } from '../../limits/counter.js'

/**
 * The store's rate counter on SQLite: the conditional upsert as a prepared statement on the ledger's own connection,
 * run at once (an implicit transaction). Inside a transaction of Kysely's on that connection, or when another process
 * holds the write lock, it takes the shared repository's way, which waits its turn.
 */
export class SqliteKeyRates extends KeyRatesRepo {
  private readonly takeOne
  private readonly peekOne

  constructor(
    private readonly raw: BetterSqlite3.Database,
    db: Kysely<Database>,
  ) {
    super(db)
    this.takeOne = raw.prepare(TAKE_SQL)
    this.peekOne = raw.prepare('SELECT requests, tokens FROM key_rates WHERE key_id = ? AND minute = ?')
  }

  override async take(keyId: string, minute: number, limits: RateLimits, tokens: number): Promise<RateAnswer> {
    if (this.raw.inTransaction) return super.take(keyId, minute, limits, tokens)
    let row: { requests: bigint; tokens: bigint } | undefined
    try {
      row = this.takeOne.get(...takeValues(keyId, minute, limits, tokens)) as typeof row
    } catch (err) {
      if ((err as { code?: string }).code?.startsWith('SQLITE_BUSY')) return super.take(keyId, minute, limits, tokens)
      throw err
    }
    if (row) return { taken: true, count: { requests: num(row.requests), tokens: num(row.tokens) } }
    return { taken: false, count: await this.peek(keyId, minute) }
  }

  override async peek(keyId: string, minute: number): Promise<RateCount> {
    const row = this.peekOne.get(keyId, minute) as { requests: bigint; tokens: bigint } | undefined
    return { requests: num(row?.requests ?? 0), tokens: num(row?.tokens ?? 0n) }
  }
}
