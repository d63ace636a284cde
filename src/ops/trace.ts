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
  /** When (by the gateway's clock) the first attempt was sent, and when the latest attempt's first event came. */
  upstreamFrom?: number
  firstEventAt?: number
  /** Upstream failures by kind (`unavailable`, `invalid_output`). */
  failures: string[]
  stream?: boolean
  /** The gateway is serving it: a client that leaves meanwhile is observed once it is done (`observeGone`). */
  underway: boolean
}

export function newTrace(): RequestTrace {
  return { attempts: 0, failures: [], underway: true }
}

/** The upstreams' share of the time until now, while a reply is underway: from the first attempt to the first event. */
export function upstreamUntilFirstEvent(trace: RequestTrace): number | undefined {
  const { upstreamFrom, firstEventAt } = trace
  return upstreamFrom === undefined || firstEventAt === undefined ? undefined : firstEventAt - upstreamFrom
}
