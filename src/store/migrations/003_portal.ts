import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * Portal: sign-in nonces and sessions live in the store so any gateway process can verify them and a nonce is used
 * once.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)

  await db.schema
    .createTable('portal_nonces')
    .addColumn('nonce', 'text', (c) => c.primaryKey())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('expires_at', big, (c) => c.notNull())
    .execute()
  await db.schema.createIndex('portal_nonces_expiry').on('portal_nonces').column('expires_at').execute()

  await db.schema
    .createTable('portal_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('csrf', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('expires_at', big, (c) => c.notNull())
    .execute()
  await db.schema.createIndex('portal_sessions_expiry').on('portal_sessions').column('expires_at').execute()

  // The provider view sums what each payee earned. Partial: only captured holds carry a payee, so opening a hold
  // (on every request's path) does not touch this index.
  await db.schema
    .createIndex('holds_payee')
    .on('holds')
    .column('payee_id')
    .where(sql.ref('payee_id'), 'is not', null)
    .execute()
}
