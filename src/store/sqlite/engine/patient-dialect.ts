import { setTimeout as sleep } from 'node:timers/promises'
import {
  CompiledQuery,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Driver,
  type TransactionSettings,
} from 'kysely'

/** How long a query of the event loop's connection waits for a locked database before it fails (SQLITE_BUSY). */
export const BUSY_WAIT_MS = 5_000

/**
 * Kysely over the event loop's SQLite connection, beside other processes that write (the `svc` CLI): transactions begin
 * IMMEDIATE (read-only ones deferred), and a locked database is waited for on timers, never in SQLite's busy handler
 * (busy_timeout 0). Why: docs/architecture.md §15.20.
 */
export class PatientSqliteDialect extends SqliteDialect {
  override createDriver(): SqliteDriver {
    const driver = super.createDriver() as SqliteDriver
    const acquire = driver.acquireConnection.bind(driver)
    driver.acquireConnection = async () => patient(await acquire())
    ;(driver as Driver).beginTransaction = async (connection: DatabaseConnection, settings: TransactionSettings) => {
      // A read-only transaction (the audit) begins deferred: it reads one snapshot and takes no write lock, so it also
      // runs on a store that refuses writes (`query_only` after a failed sync).
      await connection.executeQuery(
        CompiledQuery.raw(settings.accessMode === 'read only' ? 'begin deferred' : 'begin immediate'),
      )
    }
    return driver
  }
}

/** The wait before the next try at a locked database: 1, 2, 4 … 16 ms (for up to BUSY_WAIT_MS in all). */
export function busyDelay(previousMs: number): number {
  return Math.min(Math.max(1, previousMs * 2), 16)
}

/** SQLite's "database is locked" (SQLITE_BUSY and its extended codes): the statement did nothing and can run again. */
export function isBusyError(err: unknown): boolean {
  return (err as { code?: unknown } | null | undefined)?.code?.toString().startsWith('SQLITE_BUSY') ?? false
}

const patientConnections = new WeakSet<DatabaseConnection>()

/** Retries a query refused with SQLITE_BUSY after a short timer: it did nothing, so running it again is safe. */
function patient(connection: DatabaseConnection): DatabaseConnection {
  if (patientConnections.has(connection)) return connection
  patientConnections.add(connection)
  const execute = connection.executeQuery.bind(connection)
  connection.executeQuery = async (query) => {
    const deadline = Date.now() + BUSY_WAIT_MS
    for (let delay = busyDelay(0); ; delay = busyDelay(delay)) {
      try {
        return await execute(query)
      } catch (err) {
        if (!isBusyError(err) || Date.now() >= deadline) throw err
        await sleep(delay)
      }
    }
  }
  return connection
}
