import { Migrator, type Kysely, type Migration } from 'kysely'
import type { Dialect } from './dialect.js'
import * as m001 from './migrations/001_initial.js'
import * as m002 from './migrations/002_chain.js'

/** Migrations as plain ordered files; the list is static so the built package needs no directory scan. */
const MIGRATIONS: Record<string, { up: (db: Kysely<unknown>, dialect: Dialect) => Promise<void> }> = {
  '001_initial': m001,
  '002_chain': m002,
}

/**
 * `schema`: the Postgres schema the store lives in. Kysely looks for its migration tables in every schema unless
 * told which, so another schema's tables (a concurrent test run's) would otherwise make it skip creating ours.
 */
export async function migrate(db: Kysely<unknown>, dialect: Dialect, schema?: string | null): Promise<void> {
  const migrations: Record<string, Migration> = {}
  for (const [name, m] of Object.entries(MIGRATIONS)) migrations[name] = { up: (d) => m.up(d, dialect) }
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations }, ...(schema ? { migrationTableSchema: schema } : {}) })
  const { error, results } = await migrator.migrateToLatest()
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName
    throw new Error(`migration ${failed ?? ''} failed: ${(error as Error).message}`)
  }
}
