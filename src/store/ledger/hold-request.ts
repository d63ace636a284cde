import type { LimitReset } from '../../limits/period.js'
import type { RateTake } from '../../limits/counter.js'

/** A request's hold as the ledger is asked for it. */
export interface HoldRequest {
  requestId: string
  accountId: number
  keyId: string
  model: string
  amount: bigint
  owner: string
  now: number
  expiresAt: number
  /** The key has a spend limit that starts over at this reset: the hold counts against it (`api_keys.period_held`). */
  spendReset?: LimitReset
  /**
   * Counted against the key's rate limits in the store first (where no Redis counts them), by the hold itself: the
   * hold is refused (`rate_limit`) when they leave no room, and is counted even when the account then refuses it.
   */
  rate?: RateTake
}
