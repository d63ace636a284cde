import { sql, type Kysely } from 'kysely'
import type { Database } from './schema.js'
import { big, num } from './dialect.js'

/** What an account's request rows add up to as payee and as fee account. */
export interface RowSums {
  /** Captured requests it was paid for, their cost, and its share after fees. */
  requests: number
  gross: bigint
  earned: bigint
  /** Its pending postings derived from posted rows: payouts as payee, fees as fee account (migration 010's view). */
  pending: bigint
}

const ZERO: RowSums = { requests: 0, gross: 0n, earned: 0n, pending: 0n }

/** Rowids of `holds` read per statement: a few ms of the event loop when every row is one payee's. */
export const SLICE_ROWS = 4096
/** Accounts whose sums are kept; emptied when full (each is then folded again from its first row). */
const KEPT = 4096

interface Folded {
  /** The sums cover the rows up to this rowid. */
  upto: number
  sums: RowSums
  /** A fold under way: the next read waits for it, and goes on from where it stopped. */
  busy?: Promise<void>
}

/**
 * An account's sums over its request rows, on SQLite, read without reading its whole history each time. A payee's
 * figures were sums over every row it was paid for: a million requests took 2 s of the event loop per page view
 * (better-sqlite3 is synchronous), every request in flight stalled meanwhile.
 *
 * A request's row is written once, when it closes, and its columns summed here never change after (settlement sets
 * only its batch; a sweep turns an older version's open row into a release of no cost, which no sum counts). Rows
 * are never deleted, and SQLite gives each new row a rowid above every other, one writer at a time: the rows up to a
 * rowid read in a snapshot are all committed and stay as they are. So each account's sums are kept with the rowid
 * they cover, and a read folds in only the rows above it: through the payee and fee indexes (rowid is the last
 * column of every index entry), SLICE_ROWS rowids per statement, yielding to the event loop between statements.
 * Each process keeps its own; nothing is written.
 *
 * Postgres has no such order (sequence values can commit out of order) and runs its queries off the event loop: it
 * reads the sums whole (SettlementRepo).
 */
export class FoldedRowSums {
  private readonly folded = new Map<number, Folded>()

  constructor(private readonly db: Kysely<Database>, private readonly sliceRows = SLICE_ROWS) {}

  /** The account's sums over the rows up to `top` (a rowid read in a snapshot that saw every row below it). */
  async upTo(accountId: number, top: number): Promise<RowSums> {
    let f = this.folded.get(accountId)
    if (!f) {
      if (this.folded.size >= KEPT) this.folded.clear()
      f = { upto: 0, sums: ZERO }
      this.folded.set(accountId, f)
    }
    while (f.busy) await f.busy
    if (f.upto < top) {
      const fold = this.fold(accountId, f, top)
      f.busy = fold
      try {
        await fold
      } finally {
        f.busy = undefined
      }
    }
    return f.sums
  }

  /** The highest rowid of `holds` now. */
  async top(): Promise<number> {
    const r = await sql<{ top: number | bigint | null }>`SELECT max(rowid) AS top FROM holds`.execute(this.db)
    return num(r.rows[0]?.top ?? 0)
  }

  private async fold(accountId: number, f: Folded, top: number): Promise<void> {
    while (f.upto < top) {
      const to = Math.min(f.upto + this.sliceRows, top)
      const slice = await this.slice(accountId, f.upto, to)
      const s = f.sums
      f.sums = { requests: s.requests + slice.requests, gross: s.gross + slice.gross, earned: s.earned + slice.earned, pending: s.pending + slice.pending }
      f.upto = to
      if (f.upto < top) await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }

  /** The sums of the rows in (from, to]. */
  private async slice(accountId: number, from: number, to: number): Promise<RowSums> {
    const r = await sliceQuery(accountId, from, to).execute(this.db)
    const row = r.rows[0]!
    return { requests: num(row.requests), gross: big(row.gross), earned: big(row.earned), pending: big(row.payouts) + big(row.fees) }
  }
}

/**
 * The sums of an account's rows with rowids in (from, to], through the payee and fee indexes (a test reads its plan):
 * the view's payout and fee arms (migration 010), and the captured requests it was paid for.
 */
export function sliceQuery(accountId: number, from: number, to: number) {
  return sql<{ requests: unknown; gross: unknown; earned: unknown; payouts: unknown; fees: unknown }>`
    SELECT count(CASE WHEN status = 'captured' THEN 1 END) AS requests,
      coalesce(sum(CASE WHEN status = 'captured' THEN cost END), 0) AS gross,
      coalesce(sum(CASE WHEN status = 'captured' THEN cost - fee END), 0) AS earned,
      coalesce(sum(CASE WHEN posted = 1 THEN cost - coalesce(fee, 0) END), 0) AS payouts,
      (SELECT coalesce(sum(fee), 0) FROM holds WHERE fee_account_id = ${accountId} AND posted = 1 AND rowid > ${from} AND rowid <= ${to}) AS fees
    FROM holds WHERE payee_id = ${accountId} AND rowid > ${from} AND rowid <= ${to}`
}
