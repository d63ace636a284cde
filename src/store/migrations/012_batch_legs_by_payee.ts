import type { Kysely } from 'kysely'

/**
 * A payee's legs by batch: its portal page lists the newest batches that paid it, and without this index read every
 * leg of every batch (a batch a minute is half a million a year) on each view, on a SQLite gateway's event loop.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('batch_legs_payee').on('batch_legs').columns(['payee_id', 'batch_id']).execute()
}
