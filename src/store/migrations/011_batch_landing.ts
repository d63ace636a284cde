import type { Kysely } from 'kysely'

/**
 * Where a batch's transaction was seen mined (the block's hash beside its number) and which payers the contract
 * reported failed: a node that prunes old logs and receipts may no longer tell a restarted settler, and the contract
 * keeps only the block.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('batches').addColumn('block_hash', 'text').execute()
  await db.schema.alterTable('batches').addColumn('failed_payers', 'text').execute()
}
