import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'
import { createLedgerGroupFunctions } from './018_ledger_groups.js'

/**
 * Receipts: a request's row keeps what its receipt states beyond its usage (the SHA-256 of its body as received and the
 * prices it was charged at); a batch keeps the Merkle root of the receipts it pays, and `batch_receipts` its leaves in
 * order, so that a proof is the same however often it is asked for (docs/architecture.md, "Receipts").
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  const holds = () => db.schema.alterTable('holds')
  await holds().addColumn('body_sha256', 'text').execute()
  await holds().addColumn('input_price', big).execute()
  await holds().addColumn('output_price', big).execute()
  await db.schema.alterTable('batches').addColumn('receipts_root', 'text').execute()
  await db.schema
    .createTable('batch_receipts')
    .addColumn('batch_id', 'text', (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('leaf', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('batch_receipts_pk', ['batch_id', 'position'])
    .execute()
  await db.schema.createIndex('batch_receipts_request').on('batch_receipts').columns(['request_id']).execute()
  // The Postgres ledger's group writes the request's row with its new columns.
  if (dialect === 'postgres') await createLedgerGroupFunctions(db)
}
