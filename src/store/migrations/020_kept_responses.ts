import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * What the Responses API keeps of a response (unless `store: false`), per API key and for a bounded time
 * (`RESPONSE_RETENTION_MS`): under the response's id its whole conversation, for `previous_response_id`; under each
 * output item's id that item, for `item_reference`.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  await db.schema
    .createTable('kept_responses')
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('item_id', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('kept_responses_pk', ['key_id', 'item_id'])
    .execute()
  await db.schema.createIndex('kept_responses_created').on('kept_responses').column('created_at').execute()
}
