import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * Per-key spend limits: the limit in USDC base units (null: none) and its reset period, and the key's spend counters
 * in its current period (what its closed requests charged, and what its open holds hold). `key_holds` counts each
 * gateway instance's open holds of a limited key, as `owner_holds` does for an account, so that a sweep of a dead
 * instance takes them out of `period_held`.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  const keys = () => db.schema.alterTable('api_keys')
  await keys().addColumn('spend_limit', big).execute()
  await keys()
    .addColumn('limit_reset', 'text', (c) => c.notNull().defaultTo('none'))
    .execute()
  await keys()
    .addColumn('period_start', big, (c) => c.notNull().defaultTo(0))
    .execute()
  await keys()
    .addColumn('period_spent', big, (c) => c.notNull().defaultTo(0))
    .execute()
  await keys()
    .addColumn('period_held', big, (c) => c.notNull().defaultTo(0))
    .execute()
  await db.schema
    .createTable('key_holds')
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('held', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('key_holds_pk', ['owner', 'key_id'])
    .execute()
}
