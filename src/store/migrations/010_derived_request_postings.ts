import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * A request's postings derived from its one row (docs/ledger-written-once.md, "Postings derived from the request's
 * row"). Since 009 the close writes the request's row and, beside it, up to seven postings whose every figure the row
 * already holds (amount, cost, fee, payee, when admitted and when closed): a statement, five or so rows and two index
 * entries per request that say nothing new. From here a row closed by a capture or a release is marked `posted`, with
 * its fee's account, and `postings` becomes a view: the rows of `posting_rows` (deposits, settlements, chain moves,
 * withdrawals, and every request closed before this migration, as they were written) and the postings each posted row
 * stands for, the same seven in the same books, dated at admission and at close, none of nothing. They are still only
 * appended: a row, once closed, never changes the columns they are read from (settlement sets only its batch).
 *
 * Each kind of posting is one arm of the view, so that a query by account reaches an index in each: the payer's by
 * `holds_account_time`, a payee's by `holds_payee`, the fee account's by `holds_fee` (the row names its fee account
 * only when there is a fee). Derived postings have no id of their own (NULL).
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === 'postgres' ? 'bigint' : 'integer'
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
