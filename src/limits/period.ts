import type { LimitReset } from './limits.js'

export { LIMIT_RESETS, type LimitReset, type SpendLimit } from './limits.js'

const DAY_MS = 86_400_000

/**
 * The start (epoch ms, UTC) of the period that holds `now`: the day, the week (from Monday 00:00) or the month; 0 for
 * a limit that never resets.
 */
export function periodStart(reset: LimitReset, now: number): number {
  if (reset === 'none') return 0
  const day = Math.floor(now / DAY_MS) * DAY_MS
  if (reset === 'daily') return day
  if (reset === 'weekly') return day - ((new Date(day).getUTCDay() + 6) % 7) * DAY_MS
  const d = new Date(now)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)
}

/** When the period that holds `now` ends and the limit starts over (epoch ms); null for a limit that never resets. */
export function periodEnd(reset: LimitReset, now: number): number | null {
  if (reset === 'none') return null
  const start = periodStart(reset, now)
  if (reset === 'daily') return start + DAY_MS
  if (reset === 'weekly') return start + 7 * DAY_MS
  const d = new Date(start)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)
}

/** What a key has spent in the period that holds `now`, from its counters (spent counts only in its own period). */
export function spentNow(k: { reset: LimitReset; periodStart: number; periodSpent: bigint }, now: number): bigint {
  return k.periodStart >= periodStart(k.reset, now) ? k.periodSpent : 0n
}
