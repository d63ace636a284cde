import type { Cancel } from '../providers/cancel.js'
import type { Caller } from '../auth/caller.js'
import type { Prepared } from './prepare.js'
import type { RequestTrace } from '../ops/trace.js'

/** One request as the pipeline carries it from stage to stage. */
export interface RequestContext {
  readonly requestId: string
  readonly caller: Caller
  readonly startedAt: number
  /** Fires when the client leaves or the gateway stops serving: the upstream is cancelled. */
  readonly cancel: Cancel
  /** What the request's access line and metrics say of it, filled in as the stages learn it. */
  readonly trace: RequestTrace
  /** SHA-256 (hex) of the body as received, for the request's receipt (null when the route had none). */
  readonly bodySha256?: string | null
}

/** A request past admission: checked, planned, and its maximum cost held. */
export interface Admitted extends RequestContext {
  readonly prepared: Prepared
  readonly hold: bigint
}
