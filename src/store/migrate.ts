import { Migrator, sql, type Kysely, type Migration } from 'kysely'
import type { Dialect } from './dialect.js'
import * as m001 from './migrations/001_initial.js'
import * as m002 from './migrations/002_partial_hold_indexes.js'
import * as m003 from './migrations/003_portal.js'
import * as m004 from './migrations/004_chain.js'
import * as m005 from './migrations/005_lean_request_rows.js'
import * as m006 from './migrations/006_appended_postings.js'
import * as m007 from './migrations/007_uncached_postings.js'
import * as m008 from './migrations/008_rowid_request_rows.js'
import * as m009 from './migrations/009_records_written_once.js'
import * as m010 from './migrations/010_derived_request_postings.js'
import * as m011 from './migrations/011_batch_landing.js'
import * as m012 from './migrations/012_batch_legs_by_payee.js'
import * as m013 from './migrations/013_idempotency.js'
import * as m014 from './migrations/014_refusal_counts.js'
import * as m015 from './migrations/015_requests_in_flight.js'
import * as m016 from './migrations/016_key_limits.js'
import * as m017 from './migrations/017_key_spend_limits.js'
import * as m018 from './migrations/018_ledger_groups.js'
import * as m019 from './migrations/019_provider_offers.js'
import * as m020 from './migrations/020_kept_responses.js'
import * as m021 from './migrations/021_receipts.js'
import * as m022 from './migrations/022_lean_group_rows.js'
import * as m023 from './migrations/023_audits.js'
import * as m024 from './migrations/024_held_earnings.js'
import * as m025 from './migrations/025_x402_payments.js'

/** Migrations as plain ordered files; the list is static so the built package needs no directory scan. */
const MIGRATIONS: Record<string, { up: (db: Kysely<unknown>, dialect: Dialect) => Promise<void> }> = {
  '001_initial': m001,
  '002_partial_hold_indexes': m002,
  '003_portal': m003,
  '004_chain': m004,
  '005_lean_request_rows': m005,
  '006_appended_postings': m006,
  '007_uncached_postings': m007,
  '008_rowid_request_rows': m008,
  '009_records_written_once': m009,
  '010_derived_request_postings': m010,
  '011_batch_landing': m011,
  '012_batch_legs_by_payee': m012,
  '013_idempotency': m013,
  '014_refusal_counts': m014,
  '015_requests_in_flight': m015,
  '016_key_limits': m016,
  '017_key_spend_limits': m017,
  '018_ledger_groups': m018,
  '019_provider_offers': m019,
  '020_kept_responses': m020,
  '021_receipts': m021,
  '022_lean_group_rows': m022,
  '023_audits': m023,
  '024_held_earnings': m024,
  '025_x402_payments': m025,
}

/**
 * Migrates to the latest schema, or only as far as `through` (a migration's name: tests that build an older store);
 * the names of the migrations it ran, in order (none when the schema was current).
 */
export async function migrate(db: Kysely<unknown>, dialect: Dialect, through?: string): Promise<string[]> {
  const migrations: Record<string, Migration> = {}
  for (const [name, m] of Object.entries(MIGRATIONS)) migrations[name] = { up: (d) => m.up(d, dialect) }
  // Without a schema, Kysely looks for its migration tables in every schema of the database and, finding
  // another store's, skips creating its own ("kysely_migration_lock does not exist" when stores share a database).
  const schema =
    dialect === 'postgres' ? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]?.s : undefined
  const migrator = new Migrator({
    db: schema ? withinSchema(db) : db,
    provider: { getMigrations: async () => migrations },
    ...(schema ? { migrationTableSchema: schema } : {}),
  })
  if (through !== undefined && !(through in MIGRATIONS)) throw new Error(`no migration ${through}`)
  const { error, results } = await (through === undefined ? migrator.migrateToLatest() : migrator.migrateTo(through))
  if (error) {
    const message = (error as Error).message
    // Kysely refuses a store that ran a migration this code does not have: a store of a newer svc.
    const unknown = /previously executed migration (\S+) is missing/.exec(message)?.[1]
    if (unknown) {
      throw Object.assign(
        new Error(
          `it has migration ${unknown}, which this svc (whose last is ${Object.keys(MIGRATIONS).at(-1)}) ` +
            'does not know; run the svc that wrote it',
        ),
        { code: 'SVC_STORE_NEWER' },
      )
    }
    const failed = results?.find((r) => r.status === 'Error')?.migrationName
    throw new Error(failed ? `migration ${failed} failed: ${message}` : `migrating the store failed: ${message}`)
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName)
}

/** The name of the last migration this svc has: the schema a store it opens is brought to. */
export const LATEST_MIGRATION = Object.keys(MIGRATIONS).at(-1)!

/**
 * The database as Kysely's migrator sees it on Postgres, its introspection kept to the connection's schema: Kysely's
 * own reads the columns of every schema, and fails ("schema … does not exist") whenever another schema is dropped
 * while it runs (another store's, or a test run's cleanup).
 */
function withinSchema(db: Kysely<unknown>): Kysely<unknown> {
  const introspection = {
    getSchemas: async () =>
      (
        await sql<{ name: string }>`select nspname as name from pg_namespace where nspname = current_schema()`.execute(
          db,
        )
      ).rows,
    getTables: async () => {
      // pg_class, not information_schema: a table the role may not read is still there (and its error then names it).
      const rows = await sql<{ name: string; schema: string }>`
        select c.relname as name, n.nspname as schema from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'p', 'v')`.execute(db)
      return rows.rows.map((r) => ({ ...r, isView: false, columns: [] }))
    },
  }
  return new Proxy(db, {
    get(target, prop) {
      if (prop === 'introspection') return introspection
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

/** The migrations this svc has that the store has not run (an older store another process has not upgraded yet). */
export async function pendingMigrations(db: Kysely<unknown>): Promise<string[]> {
  const ran = await sql<{ name: string }>`select name from kysely_migration`.execute(db)
  const done = new Set(ran.rows.map((r) => r.name))
  return Object.keys(MIGRATIONS).filter((name) => !done.has(name))
}
