import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * Audits of offers (docs/architecture.md §11a): each audit's result and evidence; the reference answers audits are
 * compared with, recorded once per model, prompt and bound; and each offer's verification state, written by the
 * auditor after each audit and read by every gateway for routing.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  await db.schema
    .createTable('audits')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('offer_signature', 'text', (c) => c.notNull())
    .addColumn('prompt_id', 'text', (c) => c.notNull())
    .addColumn('result', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('request_id', 'text')
    .addColumn('evidence', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .execute()
  await db.schema.createIndex('audits_offer').on('audits').columns(['provider', 'model', 'created_at']).execute()
  await db.schema.createIndex('audits_created').on('audits').column('created_at').execute()
  await db.schema
    .createTable('audit_references')
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('prompt_id', 'text', (c) => c.notNull())
    .addColumn('max_tokens', 'integer', (c) => c.notNull())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('offer_signature', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text')
    .addColumn('answer', 'text', (c) => c.notNull())
    .addColumn('recorded_at', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('audit_references_pk', ['model', 'prompt_id', 'max_tokens'])
    .execute()
  await db.schema
    .createTable('offer_states')
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('offer_signature', 'text', (c) => c.notNull())
    .addColumn('passed', 'integer', (c) => c.notNull())
    .addColumn('failed', 'integer', (c) => c.notNull())
    .addColumn('last_audit_at', big, (c) => c.notNull())
    .addColumn('since', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('offer_states_pk', ['provider', 'model'])
    .execute()
}
