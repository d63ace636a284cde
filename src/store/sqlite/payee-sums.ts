import { setImmediate as nextTurn } from 'node:timers/promises'
import { sql, type Kysely } from 'kysely'
import type { Database } from '../schema.js'
import { big, num } from '../ints.js'
import type { PayeeSums } from '../settlement.js'

/** The highest rowids of the two tables summed, read in one snapshot. */
export interface Tops {
  rows: number
  postings: number
}

const ZERO: PayeeSums = { requests: 0, gross: 0n, earned: 0n, pending: 0n, settled: 0n }

/** Rowids of a table read per statement: a few ms of the event loop when every row is one payee's. */
export const SLICE_ROWS = 4096
/** Accounts whose sums are kept; emptied when full (each is then folded again from its first row). */
const KEPT = 4096

interface Folded {
  /** The sums cover the request rows and the postings up to these rowids. */
  upto: Tops
  sums: PayeeSums
  /** A fold under way: the next read waits for it, and goes on from where it stopped. */
  busy?: Promise<void>
}

/**
 * An account's figures as payee on SQLite, kept per process with the rowids they cover: a read folds in only the rows
 * above them, SLICE_ROWS per statement. Sound only while rows are appended and their summed columns never change: a
 * migration that renumbers `holds` or `posting_rows` needs every gateway stopped (docs/architecture.md §15.12).
 */
export class FoldedPayeeSums {
  private readonly folded = new Map<number, Folded>()

  constructor(
    private readonly db: Kysely<Database>,
    private readonly sliceRows = SLICE_ROWS,
  ) {}

  /** The account's sums over every row now (or past it, when another read went further). */
  async of(accountId: number): Promise<PayeeSums> {
    const tops = await this.tops()
    let f = this.folded.get(accountId)
    if (!f) {
      if (this.folded.size >= KEPT) this.folded.clear()
      f = { upto: { rows: 0, postings: 0 }, sums: ZERO }
      this.folded.set(accountId, f)
    }
    // Another read's fold: its failure is its own (this read folds on from where it stopped).
    while (f.busy) await f.busy.catch(() => {})
    if (f.upto.rows < tops.rows || f.upto.postings < tops.postings) {
      const fold = this.fold(accountId, f, tops)
      f.busy = fold
      try {
        await fold
      } finally {
        f.busy = undefined
      }
    }
    return f.sums
  }

  /** The highest rowids of both tables now, in one snapshot. */
  private async tops(): Promise<Tops> {
    const r = await sql<{ rows: unknown; postings: unknown }>`SELECT (SELECT max(rowid) FROM holds) AS rows,
      (SELECT max(rowid) FROM posting_rows) AS postings`.execute(this.db)
    return { rows: num(r.rows[0]?.rows ?? 0), postings: num(r.rows[0]?.postings ?? 0) }
  }

  private async fold(accountId: number, f: Folded, tops: Tops): Promise<void> {
    let first = true
    while (f.upto.rows < tops.rows) {
      if (!first) await nextTurn()
      first = false
      const to = Math.min(f.upto.rows + this.sliceRows, tops.rows)
      const r = (await rowsSliceQuery(accountId, f.upto.rows, to).execute(this.db)).rows[0]!
      const s = f.sums
      f.sums = {
        ...s,
        requests: s.requests + num(r.requests),
        gross: s.gross + big(r.gross),
        earned: s.earned + big(r.earned),
        pending: s.pending + big(r.payouts) + big(r.fees),
      }
      f.upto = { ...f.upto, rows: to }
    }
    while (f.upto.postings < tops.postings) {
      if (!first) await nextTurn()
      first = false
      const to = Math.min(f.upto.postings + this.sliceRows, tops.postings)
      const r = (await postingsSliceQuery(accountId, f.upto.postings, to).execute(this.db)).rows[0]!
      f.sums = { ...f.sums, pending: f.sums.pending + big(r.pending), settled: f.sums.settled + big(r.settled) }
      f.upto = { ...f.upto, postings: to }
    }
  }
}

/**
 * The sums of an account's request rows with rowids in (from, to], through the payee and fee indexes (a test reads its
 * plan): the postings view's payout and fee arms (migration 010), and the captured requests it was paid for.
 */
export function rowsSliceQuery(accountId: number, from: number, to: number) {
  return sql<{ requests: unknown; gross: unknown; earned: unknown; payouts: unknown; fees: unknown }>`
    SELECT count(CASE WHEN status = 'captured' THEN 1 END) AS requests,
      coalesce(sum(CASE WHEN status = 'captured' THEN cost END), 0) AS gross,
      coalesce(sum(CASE WHEN status = 'captured' THEN cost - fee END), 0) AS earned,
      coalesce(sum(CASE WHEN posted = 1 THEN cost - coalesce(fee, 0) END), 0) AS payouts,
      (SELECT coalesce(sum(fee), 0) FROM holds WHERE fee_account_id = ${accountId} AND posted = 1 AND rowid > ${from} AND rowid <= ${to}) AS fees
    FROM holds WHERE payee_id = ${accountId} AND rowid > ${from} AND rowid <= ${to}`
}

/**
 * The sums of an account's postings written as rows with rowids in (from, to], through the index of uncached books
 * (its predicate written as the index's, `UNCACHED_POSTINGS`).
 */
export function postingsSliceQuery(accountId: number, from: number, to: number) {
  return sql<{ pending: unknown; settled: unknown }>`
    SELECT coalesce(sum(CASE WHEN book = 'pending' THEN amount ELSE 0 END), 0) AS pending,
      coalesce(sum(CASE WHEN book = 'available' AND kind = 'settlement' THEN amount ELSE 0 END), 0) AS settled
    FROM posting_rows WHERE account_id = ${accountId} AND (book = 'pending' OR kind = 'settlement') AND rowid > ${from} AND rowid <= ${to}`
}
