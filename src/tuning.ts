import type { Config } from './config-schema.js'

export interface Tuning {
  firstByteTimeoutMs: number
  replyTimeoutMs: number
  idleTimeoutMs: number
  /**
   * Longest a stream waits for its client to take what it was sent. The upstream is not read meanwhile; past it the
   * client is taken as gone, and pays for what it was sent.
   */
  stallTimeoutMs: number
  keepAliveMs: number
  breakerFailures: number
  breakerCooldownMs: number
  holdTtlSeconds: number
  keyCacheMs: number
  settleIntervalMs: number
  /** How long a client may take to send a whole request (headers and body); a stream's reply is not bounded by it. */
  requestTimeoutMs: number
  /**
   * On stop, how long requests in flight may take to finish before their connections are cut (and charged for what they
   * delivered).
   */
  shutdownGraceMs: number
  /** Client connections open at once; past it the oldest that sent nothing yet is closed, else the new one. */
  maxConnections: number
  /** How long a connection may take to send a request's head (a new one, its first); past it, it is closed. */
  headTimeoutMs: number
  /** Chat requests one account may have in flight at this instance; one more is refused (503, retry). */
  maxRequestsPerAccount: number
  /**
   * Bytes of chat request bodies being read at once (by Content-Length; 4 MiB without one); past it a request is
   * refused (503, retry).
   */
  maxBodyBytesInFlight: number
  /** An offer with no attempt for this long is asked for one token, so its endpoint stats stay current (0: never). */
  offerProbeIntervalMs: number
}

export const DEFAULT_TUNING: Tuning = {
  firstByteTimeoutMs: 15_000,
  replyTimeoutMs: 300_000,
  idleTimeoutMs: 60_000,
  stallTimeoutMs: 60_000,
  keepAliveMs: 10_000,
  breakerFailures: 3,
  breakerCooldownMs: 5_000,
  holdTtlSeconds: 600,
  keyCacheMs: 2_000,
  settleIntervalMs: 60_000,
  requestTimeoutMs: 120_000,
  shutdownGraceMs: 10_000,
  maxConnections: 4096,
  headTimeoutMs: 10_000,
  maxRequestsPerAccount: 64,
  // Four times what one account's bodies can take (maxRequestsPerAccount × 4 MiB).
  maxBodyBytesInFlight: 1024 * 1024 * 1024,
  offerProbeIntervalMs: 60_000,
}

export function tuningOf(config: Config): Tuning {
  return { ...DEFAULT_TUNING, ...config.tuning }
}
