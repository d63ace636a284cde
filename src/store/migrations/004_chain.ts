import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * On-chain settlement: the wallet state read from the chain per account, the block each batch was mined in,
 * which legs of a batch failed, and an index to sum an account's unsettled charges.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)

  await db.schema
    .createTable('chain_wallets')
    .addColumn('account_id', big, (c) => c.primaryKey().references('accounts.id'))
    .addColumn('balance', big, (c) => c.notNull())
    .addColumn('allowance', big, (c) => c.notNull())
    .addColumn('block', big, (c) => c.notNull())
    // Reads older than this block are stale: a batch that moved this wallet's USDC was mined there.
    .addColumn('floor', big, (c) => c.notNull().defaultTo(0))
    .addColumn('synced_at', big, (c) => c.notNull())
    .execute()

  await db.schema.alterTable('batches').addColumn('block', big).execute()
  await db.schema
    .alterTable('batch_legs')
    .addColumn('failed', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
  await db.schema
    .createIndex('holds_account_unsettled')
    .on('holds')
    .columns(['account_id', 'status', 'batch_id'])
    .execute()
}
