import type { ApiKey, KeyRepo } from '../store/keys.js'
import type { KeyLimits } from '../limits/limits.js'
import { formatUsdc } from '../money/usdc.js'
import { periodEnd, spentNow } from '../limits/period.js'
import type { RateGate } from '../limits/rate-gate.js'

/** A key's limits as the API, the portal and `--json` show them (USDC as a decimal string; null: none). */
export function limitsView(l: KeyLimits) {
  return {
    rpm: l.rpm,
    tpm: l.tpm,
    spend_limit: l.spend && formatUsdc(l.spend.limit),
    limit_reset: l.spend?.reset ?? null,
  }
}

/** A key's spend limit, what it spent and holds in the period that holds `now`, and when that period ends. */
export function spendView(k: Pick<ApiKey, 'limits' | 'period'>, now: number) {
  const spend = k.limits.spend
  if (!spend) return { ...limitsView(k.limits), this_period: null }
  const spent = spentNow({ reset: spend.reset, periodStart: k.period.start, periodSpent: k.period.spent }, now)
  const ends = periodEnd(spend.reset, now)
  return {
    ...limitsView(k.limits),
    this_period: {
      spent_usdc: formatUsdc(spent),
      held_usdc: formatUsdc(k.period.held),
      remaining_usdc: formatUsdc(maxZero(spend.limit - spent - k.period.held)),
      resets_at: ends === null ? null : ends / 1000,
    },
  }
}

const maxZero = (v: bigint) => (v > 0n ? v : 0n)

/**
 * GET /v1/usage/keys: the account's live keys with their limits; for each rate-limited key what it used this minute
 * and when that resets (null when the counter does not answer), and for each key with a spend limit what it spent and
 * holds in its period and when that resets.
 */
export async function keyLimitsOf(keys: KeyRepo, gate: RateGate, accountId: number, now: number) {
  const live = (await keys.list(accountId)).filter((k) => k.revokedAt === null)
  const data = await Promise.all(
    live.map(async (k) => {
      const limited = k.limits.rpm !== null || k.limits.tpm !== null
      const minute = limited ? await gate.current(k.id) : null
      return {
        object: 'key_limits',
        key_id: k.id,
        name: k.name,
        prefix: k.prefix,
        this_minute: minute && {
          requests: minute.count.requests,
          tokens: minute.count.tokens,
          resets_at: minute.resets,
        },
        ...spendView(k, now),
      }
    }),
  )
  return { object: 'list', data }
}
