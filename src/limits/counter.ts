import type { RateLimits } from './limits.js'

/** A key's counts in one minute. */
export interface RateCount {
  requests: number
  tokens: number
}

/**
 * A request to count against its key's limits in `minute`: where the store counts rates (no Redis), the request's
 * hold carries it and counts it first (`HoldRequest.rate`).
 */
export interface RateTake {
  minute: number
  limits: RateLimits
  tokens: number
}

/** What a counter answered: the request counted (`taken`), or not, and the minute's counts either way. */
export interface RateAnswer {
  taken: boolean
  count: RateCount
}

/**
 * Counts each limited key's requests and tokens per minute (UTC, from the epoch), shared by every gateway process of
 * the store: Redis when the config names one, else the store itself. `take` is atomic: of requests at once from any
 * process, exactly as many as the limits leave are counted.
 */
export interface RateCounter {
  /** Counts a request of `tokens` in the key's `minute` unless that would pass one of `limits`. */
  take(keyId: string, minute: number, limits: RateLimits, tokens: number): Promise<RateAnswer>
  /** The key's counts in `minute`, without counting anything. */
  peek(keyId: string, minute: number): Promise<RateCount>
  /** Adds `delta` tokens (negative: gives back) to the key's count in `minute`, when that minute is still counted. */
  correct(keyId: string, minute: number, delta: number): Promise<void>
  close(): Promise<void>
}

/**
 * The most tokens one request is counted at. A prompt and max_tokens past it (a huge max_tokens on `svc/cortex@1`,
 * whose maximum cost no account could pay) count as this many: an integer every counter stores, whose sums over
 * millions of requests a minute stay within a counter's 64 bits.
 */
export const MAX_TAKE_TOKENS = 2 ** 40

export const MINUTE_MS = 60_000

export const minuteOf = (now: number) => Math.floor(now / MINUTE_MS)
