import type { RateLimits } from '../limits/limits.js'
import type { SpendLimit } from '../limits/period.js'

/** Who sends a request: the API key's id and its owner's account. */
export interface Caller {
  keyId: string
  accountId: number
  address: string
  /** The key's rate limits, when it has any. */
  limits?: RateLimits
  /** The key's spend limit, when it has one. */
  spend?: SpendLimit
}
