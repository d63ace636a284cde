import { big, bigOrNull, num } from '../ints.js'
import { periodStart, type LimitReset } from '../../limits/period.js'
import type { HoldRequest, KeySpend } from './types.js'

/**
 * The writes of a key's spend limit, as SQL both dialects run (`GREATEST` is named `max` on SQLite). Placeholders:
 * `:key`, `:amount` (the hold), `:cost` (the close's charge), `:reset` (the limit's reset as the hold was admitted) and
 * `:period` (the start of that reset's period at the write's time, `periodStart`). What was spent counts only in the
 * latest period seen, and a period never moves back (gateways whose clocks differ a little agree on the later one).
 * A write whose reset is not the key's now (the limit changed while its request ran, or the gateway's key cache is
 * older) moves no period: it counts in the key's current one, never wiping what that one spent.
 */
const current = `limit_reset = :reset`
const spentIn = `CASE WHEN ${current} AND period_start < :period THEN 0 ELSE period_spent END`
const startAt = `CASE WHEN ${current} THEN GREATEST(period_start, :period) ELSE period_start END`

/** A hold of a key with a spend limit: counted when the period's spent and held, with it, stay within the limit. */
export const KEY_HOLD = `UPDATE api_keys SET period_spent = ${spentIn}, period_start = ${startAt},
  period_held = period_held + :amount
  WHERE id = :key AND (spend_limit IS NULL OR ${spentIn} + period_held + :amount <= spend_limit)`

/** The close of a hold a key counted: out of what it holds, and its charge into what the period spent. */
export const KEY_CLOSE = `UPDATE api_keys SET period_held = GREATEST(period_held - :amount, 0),
  period_spent = ${spentIn} + :cost, period_start = ${startAt}
  WHERE id = :key`

/** The instance's counter of the key's open holds (`key_holds`), as `owner_holds` is the account's. */
export const KEY_HELD = `INSERT INTO key_holds (owner, key_id, held) VALUES (:owner, :key, :amount)
  ON CONFLICT (owner, key_id) DO UPDATE SET held = key_holds.held + excluded.held`

export const KEY_UNHELD = `UPDATE key_holds SET held = GREATEST(held - :amount, 0) WHERE owner = :owner AND key_id = :key`

export const KEY_SPEND_ROW = 'SELECT spend_limit, limit_reset, period_start, period_spent, period_held FROM api_keys'

/** A key's limit and counters, from its row (KEY_SPEND_ROW). */
export function toKeySpend(r: {
  spend_limit: unknown
  limit_reset: string
  period_start: unknown
  period_spent: unknown
  period_held: unknown
}): KeySpend {
  return {
    limit: bigOrNull(r.spend_limit),
    reset: r.limit_reset as LimitReset,
    periodStart: num(r.period_start),
    periodSpent: big(r.period_spent),
    periodHeld: big(r.period_held),
  }
}

/** The named values of a key statement for a hold (and the charge of its close, at `now`). */
export function keyValues(h: HoldRequest, now: number, cost = 0n) {
  const reset = h.spendReset ?? 'none'
  return { key: h.keyId, owner: h.owner, amount: h.amount, cost, reset, period: periodStart(reset, now) }
}
