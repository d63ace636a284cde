import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/**
 * A request's postings derived from its one row (docs/ledger-written-once.md): closed rows are marked `posted`, and
 * `postings` becomes a view over `posting_rows` and one arm per kind of derived posting, each reaching an index by
 * account. Derived postings have no id (NULL). Details: docs/architecture.md §15.22.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  const steps = async (db: Kysely<unknown>) => {
    await sql.raw('ALTER TABLE postings RENAME TO posting_rows').execute(db)
    await sql.raw('ALTER TABLE holds ADD COLUMN posted integer NOT NULL DEFAULT 0').execute(db)
    await sql.raw(`ALTER TABLE holds ADD COLUMN fee_account_id ${big}`).execute(db)
    await sql.raw('CREATE INDEX holds_fee ON holds (fee_account_id) WHERE fee_account_id IS NOT NULL').execute(db)
    await sql.raw(`CREATE VIEW postings AS ${POSTINGS_VIEW}`).execute(db)
  }
  // Postgres runs each migration in a transaction of Kysely's; SQLite's DDL is transactional, but Kysely does not
  // wrap it.
  if (dialect === 'sqlite') await db.transaction().execute(steps)
  else await steps(db)
}

/** One arm per kind: (account, book, kind, amount, date) of a posted row, where the amount is not zero. */
const ARMS: [account: string, book: string, kind: string, amount: string, at: string][] = [
  ['account_id', 'held', 'hold', 'amount', 'created_at'],
  ['account_id', 'available', 'hold', '-amount', 'created_at'],
  ['account_id', 'held', 'release', 'cost - amount', 'closed_at'],
  ['account_id', 'available', 'release', 'amount - cost', 'closed_at'],
  ['account_id', 'held', 'capture', '-cost', 'closed_at'],
  ['payee_id', 'pending', 'payout', 'cost - coalesce(fee, 0)', 'closed_at'],
  ['fee_account_id', 'pending', 'fee', 'fee', 'closed_at'],
]

const POSTINGS_VIEW = [
  'SELECT id, ref, account_id, book, kind, amount, created_at FROM posting_rows',
  ...ARMS.map(
    ([account, book, kind, amount, at]) =>
      `SELECT NULL, request_id, ${account}, '${book}', '${kind}', ${amount}, ${at} FROM holds WHERE posted = 1 AND ${account} IS NOT NULL AND ${amount} <> 0`,
  ),
].join('\nUNION ALL\n')
