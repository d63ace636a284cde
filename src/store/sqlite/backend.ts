import type { StoreBackend, StoreOptions } from '../backend.js'
import { migrated } from '../backend.js'
import { openSqlite } from './open.js'
import { sqliteDialect } from './dialect.js'
import { SqliteHotLedger } from './hot-ledger.js'
import { SqliteKeyRates } from './key-rates.js'

/** The store on SQLite (`sqlite:<path>` or `sqlite::memory:`): one file, one writer, this process's event loop. */
export async function openSqliteBackend(url: string, opts: StoreOptions = {}): Promise<StoreBackend> {
  const h = openSqlite(url, opts.walLimitBytes)
  const ran = await migrated(h.db, sqliteDialect, h.close)
  opts.migrated?.(ran)
  return {
    ...sqliteDialect,
    db: h.db,
    ledger: new SqliteHotLedger(h.raw, h.db, h.file, opts.sync),
    keyRates: new SqliteKeyRates(h.raw, h.db),
    tryLock: h.tryLock,
    close: h.close,
  }
}
