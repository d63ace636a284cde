/**
 * What one request's access line and metrics say about it, filled in by the pipeline's stages as they learn it: the
 * model, how it was routed and served, its tokens and cost, and where its time went.
 */
export interface RequestTrace {
  model?: string
  /** The routing status: `available`, `failover:<n>`, `managed:<why>`. */
  routing?: string
  provider?: string
  /** The request's outcome (`completed`, `no_capacity`, `insufficient_quota`, …). */
  outcome?: string
  promptTokens?: number
  completionTokens?: number
  cost?: bigint
  fee?: bigint
  /** Offers attempted, the last one included. */
  attempts: number
  /** When the reply's first byte went out (ms from the request's start): a stream's, before its end. */
  ttfbMs?: number
  /** Time spent waiting on upstreams (ms), from the first attempt to the last event. */
  upstreamMs?: number
  /** Upstream failures by kind (`unavailable`, `invalid_output`). */
  failures: string[]
  stream?: boolean
  /** Its access line and metrics are written (once, whichever way its response ended). */
  observed?: boolean
}

export function newTrace(): RequestTrace {
  return { attempts: 0, failures: [] }
}
