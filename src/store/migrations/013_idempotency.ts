import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * Idempotency keys (`Idempotency-Key`): per API key, the first request that used one, its body's hash, and once it
 * finished, its reply when that can be sent again. Kept 24 hours.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  await db.schema
    .createTable('idempotency')
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('idem_key', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('body_hash', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('reply_status', 'integer')
    .addColumn('reply_body', 'text')
    .addColumn('created_at', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_pk', ['key_id', 'idem_key'])
    .execute()
  await db.schema.createIndex('idempotency_created').on('idempotency').column('created_at').execute()
}
