import type { Kysely } from 'kysely'
import { migrate } from './migrate.js'
import { openPostgres } from './postgres/open.js'
import { openSqlite } from './sqlite/open.js'
import { Store } from './store.js'
import { SYSTEM_ACCOUNTS } from './accounts.js'
import { SqliteHotLedger } from './sqlite/hot-ledger.js'
import type { SyncWays } from './sqlite/wal-sync.js'
import { PostgresHotLedger } from './postgres/hot-ledger.js'
import type { Database } from './schema.js'
import type { StoreDialect } from './dialect.js'
import { sqliteDialect } from './sqlite/dialect.js'
import { postgresDialect } from './postgres/dialect.js'

export interface StoreOptions {
  /** SQLite: the size the WAL is kept near under sustained writes (default 64 MiB). */
  walLimitBytes?: number
  /** SQLite: how the WAL is synced (default `fs.fdatasync` and `fs.fdatasyncSync`; tests inject theirs). */
  sync?: SyncWays
  /** Told the migrations the open ran (none when the schema was current). */
  migrated?: (names: string[]) => void
}

/** Opens the store named by a `sqlite:` or `postgres://` URL, migrated and with the system accounts present. */
export async function openStore(url: string, now: () => number = Date.now, opts: StoreOptions = {}): Promise<Store> {
  let store: Store
  if (url.startsWith('sqlite:')) {
    const h = openSqlite(url, opts.walLimitBytes)
    const ran = await migrated(h.db, sqliteDialect, () => h.backend.close())
    opts.migrated?.(ran)
    store = new Store(h.db, sqliteDialect, h.backend, new SqliteHotLedger(h.raw, h.db, h.file, opts.sync))
  } else if (/^postgres(ql)?:\/\//.test(url)) {
    const h = await openPostgres(url)
    const ran = await migrated(h.db, postgresDialect, () => h.backend.close())
    opts.migrated?.(ran)
    store = new Store(h.db, postgresDialect, h.backend, new PostgresHotLedger(h.pool))
  } else {
    throw new Error(`store must be sqlite:<path> or a postgres:// URL, got ${url}`)
  }
  try {
    for (const address of Object.values(SYSTEM_ACCOUNTS)) await store.accounts.ensure(address, 'system', now())
  } catch (err) {
    await store.close()
    throw err
  }
  return store
}

async function migrated(
  db: Kysely<Database>,
  dialect: StoreDialect,
  closeBackend: () => Promise<void>,
): Promise<string[]> {
  try {
    return await migrate(db as unknown as Kysely<unknown>, dialect.name)
  } catch (err) {
    await db.destroy()
    await closeBackend()
    throw err
  }
}
