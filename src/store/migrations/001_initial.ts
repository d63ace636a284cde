import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/** Accounts, keys, the append-only ledger, holds, usage, settlement batches and gateway instances. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === 'postgres' ? 'bigint' : 'integer'
  const serial = (t: ReturnType<Kysely<unknown>['schema']['createTable']>) =>
    dialect === 'postgres'
      ? t.addColumn('id', 'bigserial', (c) => c.primaryKey())
      : t.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())

  await serial(db.schema.createTable('accounts'))
    .addColumn('address', 'text', (c) => c.notNull().unique())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('balance', big, (c) => c.notNull().defaultTo(0))
    .addColumn('held', big, (c) => c.notNull().defaultTo(0))
    .addColumn('cap', big, (c) => c.notNull().defaultTo(0))
    .addColumn('debt', big, (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', big, (c) => c.notNull())
    .addCheckConstraint('accounts_held_nonneg', sql`held >= 0`)
    .execute()

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('hash', 'text', (c) => c.notNull().unique())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('last_used_at', big)
    .addColumn('revoked_at', big)
    .execute()
  await db.schema.createIndex('api_keys_account').on('api_keys').column('account_id').execute()

  await serial(db.schema.createTable('postings'))
    .addColumn('ref', 'text', (c) => c.notNull())
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('book', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('amount', big, (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .execute()
  await db.schema.createIndex('postings_ref').on('postings').column('ref').execute()
  await db.schema.createIndex('postings_account').on('postings').columns(['account_id', 'book']).execute()

  await db.schema
    .createTable('holds')
    .addColumn('request_id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('amount', big, (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('expires_at', big, (c) => c.notNull())
    .addColumn('closed_at', big)
    .addColumn('cost', big)
    .addColumn('payee_id', big)
    .addColumn('fee', big)
    .addColumn('batch_id', 'text')
    .execute()
  await db.schema.createIndex('holds_open').on('holds').columns(['status', 'expires_at']).execute()
  await db.schema.createIndex('holds_owner').on('holds').columns(['owner', 'status']).execute()
  await db.schema.createIndex('holds_batch').on('holds').columns(['batch_id', 'status']).execute()

  await db.schema
    .createTable('usage')
    .addColumn('request_id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('served_model', 'text')
    .addColumn('provider', 'text')
    .addColumn('stream', 'integer', (c) => c.notNull())
    .addColumn('prompt_tokens', 'integer', (c) => c.notNull())
    .addColumn('completion_tokens', 'integer', (c) => c.notNull())
    .addColumn('upstream_prompt_tokens', 'integer')
    .addColumn('upstream_completion_tokens', 'integer')
    .addColumn('cost', big, (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('latency_ms', 'integer', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .execute()
  await db.schema.createIndex('usage_account_time').on('usage').columns(['account_id', 'created_at']).execute()

  await db.schema
    .createTable('batches')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('total', big, (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('sent_at', big)
    .addColumn('settled_at', big)
    .addColumn('tx_hash', 'text')
    .addColumn('nonce', 'integer')
    .execute()

  await db.schema
    .createTable('batch_legs')
    .addColumn('batch_id', 'text', (c) => c.notNull().references('batches.id'))
    .addColumn('payer_id', big, (c) => c.notNull())
    .addColumn('payee_id', big, (c) => c.notNull())
    .addColumn('amount', big, (c) => c.notNull())
    .addPrimaryKeyConstraint('batch_legs_pk', ['batch_id', 'payer_id', 'payee_id'])
    .execute()

  await db.schema
    .createTable('instances')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    .addColumn('started_at', big, (c) => c.notNull())
    .addColumn('heartbeat_at', big, (c) => c.notNull())
    .execute()
}
