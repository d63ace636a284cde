import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * Earnings held back from settlement (docs/architecture.md §11a): an offer quarantined by its audits has its charges
 * since its last passed audit kept out of batches until an operator releases them (they are paid as usual) or forfeits
 * them (each charge refunded to its payer, named in `forfeited_charges`); a hold ends (`to_at`) when the offer leaves
 * quarantine.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  await db.schema
    .createTable('held_earnings')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('from_at', big, (c) => c.notNull())
    .addColumn('to_at', big)
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('audit_id', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('decided_at', big)
    .addColumn('note', 'text')
    .addColumn('refunded', big)
    .addColumn('refunded_charges', 'integer')
    .execute()
  await db.schema.createIndex('held_earnings_status').on('held_earnings').columns(['status']).execute()
  // At most one undecided hold per offer, whichever process quarantines it.
  await sql`CREATE UNIQUE INDEX held_earnings_open ON held_earnings (provider, model) WHERE status = 'held'`.execute(db)
  await db.schema
    .createTable('forfeited_charges')
    .addColumn('request_id', 'text', (c) => c.primaryKey())
    .addColumn('held_id', 'text', (c) => c.notNull())
    .addColumn('amount', big, (c) => c.notNull())
    .execute()
}
