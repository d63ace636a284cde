import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * Requests a gateway instance is serving, written by its heartbeat; `cut_off_at` is set when the instance died with
 * them in flight, so that such a request has a usage record (outcome `cut_off`) once its hold is released.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  await db.schema
    .createTable('requests_in_flight')
    .addColumn('request_id', 'text', (c) => c.primaryKey())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('account_id', big, (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('stream', 'integer', (c) => c.notNull())
    .addColumn('prompt_tokens', 'integer', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('cut_off_at', big)
    .execute()
  await db.schema.createIndex('requests_in_flight_owner').on('requests_in_flight').column('owner').execute()
}
