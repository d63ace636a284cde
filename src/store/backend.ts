import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import type { Lock, StoreDialect } from './dialect.js'
import type { HotLedger } from './ledger/types.js'
import type { KeyRatesRepo } from './key-rates.js'
import type { SyncWays } from './sqlite/engine/wal-sync.js'
import { migrate } from './migrate.js'

/**
 * A store's database, as one dialect folder builds it (`sqlite/backend.ts`, `postgres/backend.ts`): its connection,
 * the dialect's ways of asking (`StoreDialect`, which the shared repositories read), its hot ledger (the money writes
 * on every request's path), its rate counts, cross-process locks, and its close. Opened migrated.
 */
export interface StoreBackend extends StoreDialect {
  readonly db: Kysely<Database>
  readonly ledger: HotLedger
  readonly keyRates: KeyRatesRepo
  /** A lock held across processes until released; null when another holder has it. */
  tryLock(name: string): Promise<Lock | null>
  /** Lets go of the connection's own resources (the hot ledger closes first, then the Kysely instance). */
  close(): Promise<void>
}

export interface StoreOptions {
  /** SQLite: the size the WAL is kept near under sustained writes (default 64 MiB). */
  walLimitBytes?: number
  /** SQLite: how the WAL is synced (default `fs.fdatasync` and `fs.fdatasyncSync`; tests inject theirs). */
  sync?: SyncWays
  /** Told the migrations the open ran (none when the schema was current). */
  migrated?: (names: string[]) => void
}

/** Runs the migrations a new connection's schema lacks; on a failure, closes what was opened and rethrows. */
export async function migrated(
  db: Kysely<Database>,
  dialect: StoreDialect,
  closeOpened: () => Promise<void>,
): Promise<string[]> {
  try {
    return await migrate(db as unknown as Kysely<unknown>, dialect.name)
  } catch (err) {
    await db.destroy()
    await closeOpened()
    throw err
  }
}
