import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * x402 payments (docs/architecture.md §4a): each signed EIP-3009 authorization a request was paid with, claimed by its
 * payer and nonce before its transfer is sent (one payment serves one request, whichever gateway sees it first), then
 * credited to the payer's prepaid account once the transfer is mined.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  await db.schema
    .createTable('x402_payments')
    .addColumn('payer', 'text', (c) => c.notNull())
    .addColumn('nonce', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('amount', big, (c) => c.notNull())
    .addColumn('valid_before', big, (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('account_id', big)
    .addColumn('tx_hash', 'text')
    .addColumn('note', 'text')
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('x402_payments_pk', ['payer', 'nonce'])
    .execute()
  await db.schema.createIndex('x402_payments_status').on('x402_payments').columns(['status', 'updated_at']).execute()
  await db.schema.createIndex('x402_payments_account').on('x402_payments').columns(['account_id']).execute()
}
