import { setImmediate as nextTurn } from 'node:timers/promises'
import { sql, type Kysely } from 'kysely'
import type { Database } from '../schema.js'
import { big, num } from '../ints.js'
import {
  DAY_MS,
  DAY_OF,
  matching,
  type DailySpend,
  type UsageFilter,
  type UsageSummary,
  type UsageTotals,
} from '../usage.js'

/** Rows of the account per statement, at most (but for rows of one millisecond). */
export const SLICE_ROWS = 4096

/** An account's summary (`UsageRepo.summary`): its usage matching `filter`, by day from `since`; `sliceRows`: tests. */
export interface SummaryQuery {
  accountId: number
  filter: UsageFilter
  since: number
  sliceRows?: number
}

/**
 * The summary on SQLite, read in slices of SLICE_ROWS rows through `holds_account_time`, the event loop free between
 * them. A row written during the read into a span already read is not counted; none is counted twice (§15.13 of
 * docs/architecture.md).
 */
export async function slicedSummary(
  db: Kysely<Database>,
  { accountId, filter, since, sliceRows = SLICE_ROWS }: SummaryQuery,
): Promise<UsageSummary> {
  const bounds = await boundsQuery(accountId).execute(db)
  const totals: UsageTotals = { requests: 0, promptTokens: 0, completionTokens: 0, cost: 0n }
  const days = new Map<number, DailySpend>()
  const { first, last } = bounds.rows[0]!
  if (first === null || last === null) return { totals, daily: [] }
  const end = num(last) + 1
  for (let from = num(first); from < end;) {
    const to = await sliceEnd(db, { accountId, from, end, rows: sliceRows })
    const rows = await usageSliceQuery(db, accountId, filter, { from, to }).execute()
    for (const r of rows) {
      const requests = num(r.requests)
      const cost = big(r.cost)
      totals.requests += requests
      totals.promptTokens += num(r.prompt)
      totals.completionTokens += num(r.completion)
      totals.cost += cost
      const day = num(r.day) * DAY_MS
      if (day < since) continue
      const d = days.get(day)
      if (d) {
        d.requests += requests
        d.cost += cost
      } else days.set(day, { day, requests, cost })
    }
    from = to
    if (from < end) await nextTurn()
  }
  return { totals, daily: [...days.values()].sort((a, b) => a.day - b.day) }
}

/**
 * Where the slice from `from` ends: at the time of the `rows`-th row of the account from there, past every row of
 * `from`'s millisecond.
 */
async function sliceEnd(
  db: Kysely<Database>,
  { accountId, from, end, rows }: { accountId: number; from: number; end: number; rows: number },
): Promise<number> {
  const r = await sliceEndQuery(accountId, from, rows).execute(db)
  const at = r.rows[0]?.at
  return at === undefined || at === null ? end : Math.max(num(at), from + 1)
}

/** The time of the `rows`-th row of the account from `from`, through its index by time (a test reads its plan). */
export function sliceEndQuery(accountId: number, from: number, rows: number) {
  return sql<{
    at: unknown
  }>`SELECT created_at AS at FROM holds WHERE account_id = ${accountId} AND created_at >= ${from}
    ORDER BY created_at LIMIT 1 OFFSET ${rows}`
}

/** The account's first and last request times, each the end of its index by time (a test reads its plan). */
export function boundsQuery(accountId: number) {
  return sql<{ first: unknown; last: unknown }>`SELECT
    (SELECT min(created_at) FROM holds WHERE account_id = ${accountId}) AS first,
    (SELECT max(created_at) FROM holds WHERE account_id = ${accountId}) AS last`
}

/**
 * The account's usage in [from, to) matching `filter`, per UTC day, through its index by time (a test reads its plan).
 */
export function usageSliceQuery(
  db: Kysely<Database>,
  accountId: number,
  filter: UsageFilter,
  { from, to }: { from: number; to: number },
) {
  return db
    .selectFrom('usage')
    .select([
      DAY_OF.as('day'),
      (eb) => eb.fn.countAll().as('requests'),
      sql<unknown>`coalesce(sum(prompt_tokens), 0)`.as('prompt'),
      sql<unknown>`coalesce(sum(completion_tokens), 0)`.as('completion'),
      sql<unknown>`coalesce(sum(cost), 0)`.as('cost'),
    ])
    .where(matching(accountId, { ...filter, since: from }))
    .where('created_at', '<', BigInt(to))
    .groupBy(DAY_OF)
}
