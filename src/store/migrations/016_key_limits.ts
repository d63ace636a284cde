import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * Per-key rate limits (requests and tokens a minute; null: none) and, where the config names no Redis, each limited
 * key's counts in its current minute (`key_rates`).
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  await db.schema.alterTable('api_keys').addColumn('rpm', 'integer').execute()
  await db.schema.alterTable('api_keys').addColumn('tpm', 'integer').execute()
  await db.schema
    .createTable('key_rates')
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('minute', big, (c) => c.notNull())
    .addColumn('requests', 'integer', (c) => c.notNull())
    .addColumn('tokens', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('key_rates_pk', ['key_id', 'minute'])
    .execute()
}
