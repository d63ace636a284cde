import type { RateTake } from '../../limits/counter.js'
import type { StoreBackend, StoreOptions } from '../backend.js'
import { migrated } from '../backend.js'
import { openPostgres } from './open.js'
import { postgresDialect } from './dialect.js'
import { PostgresHotLedger } from './hot-ledger.js'
import { PostgresKeyRates } from './key-rates.js'

/** The store on Postgres (`postgres://…`, `?schema=` for a schema of its own): many processes, one server. */
export async function openPostgresBackend(url: string, opts: StoreOptions = {}): Promise<StoreBackend> {
  const h = await openPostgres(url)
  const ran = await migrated(h.db, postgresDialect, h.close)
  opts.migrated?.(ran)
  const keyRates = new PostgresKeyRates(h.db)
  const takeRate = (keyId: string, t: RateTake) => keyRates.take(keyId, t.minute, t.limits, t.tokens)
  return {
    ...postgresDialect,
    db: h.db,
    ledger: new PostgresHotLedger(h.pool, takeRate),
    keyRates,
    tryLock: h.tryLock,
    close: h.close,
  }
}
