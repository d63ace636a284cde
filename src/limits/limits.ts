/** A key's limits, as every layer names them: rates a minute, and what it may spend in a period. */

/** When a key's spend limit starts over: never, or at each UTC day, week (Monday) or month. */
export type LimitReset = 'none' | 'daily' | 'weekly' | 'monthly'

export const LIMIT_RESETS: readonly LimitReset[] = ['none', 'daily', 'weekly', 'monthly']

/** A key's spend limit: base units it may spend in a period, and when the period starts over. */
export interface SpendLimit {
  limit: bigint
  reset: LimitReset
}

/** A key's rate limits: requests and tokens a minute; null where it has none. */
export interface RateLimits {
  rpm: number | null
  tpm: number | null
}

/** All of a key's limits: its rates, and what it may spend in a period (null: no spend limit). */
export interface KeyLimits extends RateLimits {
  spend: SpendLimit | null
}

export const NO_LIMITS: KeyLimits = { rpm: null, tpm: null, spend: null }
