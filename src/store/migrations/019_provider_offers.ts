import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * Providers' endpoints and offers kept in the store, changed while gateways run (a provider's wallet registers them
 * through the portal or `svc provider`): gateways read the live ones every few seconds beside the config's.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  await db.schema
    .createTable('provider_endpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', big, (c) => c.notNull())
    .addColumn('base_url', 'text', (c) => c.notNull())
    .addColumn('api_key', 'text')
    .addColumn('bundle', 'text', (c) => c.notNull())
    .addColumn('profile', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .execute()
  await db.schema.createIndex('provider_endpoints_account').on('provider_endpoints').column('account_id').execute()
  await db.schema
    .createTable('provider_offers')
    .addColumn('endpoint_id', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('upstream_model', 'text', (c) => c.notNull())
    .addColumn('input_price', big, (c) => c.notNull())
    .addColumn('output_price', big, (c) => c.notNull())
    .addColumn('max_concurrency', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('provider_offers_pk', ['endpoint_id', 'model'])
    .execute()
}
