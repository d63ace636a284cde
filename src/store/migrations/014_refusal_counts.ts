import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * Requests refused before admission (no capacity, insufficient quota), counted per account, key, model, code and
 * minute instead of a record each: an outage with clients retrying adds a row a minute per key, model and code.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  await db.schema
    .createTable('refusal_counts')
    .addColumn('account_id', big, (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('code', 'text', (c) => c.notNull())
    .addColumn('minute', big, (c) => c.notNull())
    .addColumn('count', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('refusal_counts_pk', ['account_id', 'key_id', 'model', 'code', 'minute'])
    .execute()
}
