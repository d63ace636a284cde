import { mkdirSync, realpathSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { Kysely } from 'kysely'
import { PatientSqliteDialect } from './engine/patient-dialect.js'
import type { Database } from '../schema.js'
import type { Lock } from '../dialect.js'
import { Checkpointer } from './engine/checkpointer.js'
import { createRequire } from 'node:module'

export interface SqliteHandle {
  db: Kysely<Database>
  raw: BetterSqlite3.Database
  /** One process owns an embedded database: a lock only keeps two loops of this process apart. */
  tryLock(name: string): Promise<Lock | null>
  /** Stops the checkpointer (the Kysely instance is destroyed by the store). */
  close(): Promise<void>
  /** The database file (absolute), its checkpointer and WAL limit; absent for an in-memory database. */
  file?: { path: string; checkpointer: Checkpointer; walLimitBytes: number }
}

/** Page size of a new database file. */
export const PAGE_SIZE = 1024

/** Size the WAL is kept near under sustained writes (and truncated to when it starts over). */
export const WAL_LIMIT_BYTES = 64 * 1024 * 1024

/**
 * Opens `sqlite:<path>` (or `sqlite::memory:`) with WAL and safe integers; a CLI process may open the same file beside
 * it.
 */
export function openSqlite(url: string, walLimitBytes = WAL_LIMIT_BYTES): SqliteHandle {
  const path = url.slice('sqlite:'.length)
  const memory = path === ':memory:' || path === ''
  if (!memory) mkdirSync(dirname(resolve(path)), { recursive: true })
  const raw = new BetterSqlite3(memory ? ':memory:' : path)
  // Every page a transaction changes is written whole to the WAL; a request changes about ten, a few rows each
  // (docs/performance.md). Small pages write a quarter of the bytes. Only a new file takes it: an existing one keeps
  // the page size it was made with.
  raw.pragma(`page_size = ${PAGE_SIZE}`)
  raw.pragma('journal_mode = WAL')
  raw.pragma('synchronous = NORMAL')
  // Locked-database waits happen on timers (PatientSqliteDialect), never asleep on the event loop.
  raw.pragma('busy_timeout = 0')
  raw.pragma('foreign_keys = ON')
  raw.defaultSafeIntegers(true)
  let checkpointer: Checkpointer | undefined
  // SQLite follows a symbolic link to the database and keeps the WAL beside the file it leads to.
  const file = memory ? '' : realpathSync(resolve(path))
  if (!memory) {
    // Checkpoints leave the event loop for a worker thread; the WAL starts over near its limit and is truncated to it.
    raw.pragma('wal_autocheckpoint = 0')
    raw.pragma(`journal_size_limit = ${walLimitBytes}`)
    const frameBytes = Number(raw.pragma('page_size', { simple: true })) + 24
    checkpointer = new Checkpointer(file, createRequire(import.meta.url).resolve('better-sqlite3'), {
      limitFrames: Math.max(1, Math.floor(walLimitBytes / frameBytes)),
      onError: (msg) => console.error(`sqlite checkpoint: ${msg}`),
    })
    // Without its worker the WAL would grow for ever: writers checkpoint themselves again, as SQLite does by default
    // (every 1000 pages: 1 MiB of 1 KiB pages).
    void checkpointer.lost.then(() => {
      if (raw.open) raw.pragma('wal_autocheckpoint = 1000')
    })
  }
  const locks = new Set<string>()
  const tryLock = async (name: string): Promise<Lock | null> => {
    if (locks.has(name)) return null
    locks.add(name)
    return { release: async () => void locks.delete(name) }
  }
  const close = async () => {
    await checkpointer?.stop()
  }
  const db = new Kysely<Database>({ dialect: new PatientSqliteDialect({ database: raw }) })
  return { db, raw, tryLock, close, ...(checkpointer ? { file: { path: file, checkpointer, walLimitBytes } } : {}) }
}
