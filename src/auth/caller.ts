import type { RateLimits } from '../store/keys.js'

/** Who sends a request: the API key's id and its owner's account. */
export interface Caller {
  keyId: string
  accountId: number
  address: string
  /** The key's rate limits, when it has any. */
  limits?: RateLimits
}
