import { apiError } from '../protocol/errors.js'
import type { Cancel } from '../providers/cancel.js'
import type { Health } from '../routing/health.js'
import type { ContentEvent } from '../routing/attempt.js'
import { RouteRun, type Committed, type RouteOutcome } from '../routing/route-run.js'
import type { LedgerRepo } from '../store/ledger/repo.js'
import { charge, chargedAfterAll, requestUsage, type ChargeDeps, type Delivered, type Finished } from './charge.js'
import type { Admitted } from './context.js'
import type { Remember } from './idempotency.js'
import type { Answer, ReplyEvent, ReplyEvents } from './reply-events.js'
import { internalError } from './refusals.js'
import { traceFinished } from './trace.js'

export interface ServingDeps {
  health: Health
  ledger: LedgerRepo
  charge: ChargeDeps
  now: () => number
  log: (msg: string, err?: unknown) => void
}

/** Told once how an admitted request finished (undefined: it failed inside the gateway, nothing known charged). */
export type Done = (finished: Finished | undefined) => Promise<Remember | undefined>

/**
 * Serves admitted requests: runs each one's route to its first content (or its whole reply), answers with the events
 * the route then pulls, charges what was delivered before `charged` is yielded, and recovers from an internal failure
 * (its hold released). Requests being served end when the gateway's stop grace does (`stopServing`).
 */
export class Serving {
  /** The cancels of the requests being served: the stop's grace ends them. */
  private readonly serving = new Set<Cancel>()
  private stopped = false

  constructor(private readonly deps: ServingDeps) {}

  async answer(r: Admitted, done: Done): Promise<Answer> {
    this.serving.add(r.cancel)
    // One that reaches its upstream after the grace ended (its body or hold came late) is ended at once, the same way.
    if (this.stopped) r.cancel.abort('stopping')
    const { health, now } = this.deps
    const { reachability } = this.deps.charge
    const run = new RouteRun(r.prepared.plan, r.prepared.calls, {
      cancel: r.cancel,
      health,
      reachability,
      now,
      trace: r.trace,
    })
    r.trace.upstreamFrom = now()
    let first: Committed | RouteOutcome
    try {
      first = await run.start()
    } catch (err) {
      return this.answered(r, await this.recover(r, err, false), done)
    }
    if (first.kind === 'committed' || first.kind === 'delivered')
      return { kind: 'serving', request: r, events: this.events(r, run, first, done) }
    r.trace.upstreamMs = now() - r.trace.upstreamFrom
    return this.answered(r, await this.finish(r, first), done)
  }

  /**
   * The stop's grace is over: requests still being served end now, each answered as a failure to retry (a stream with
   * an error chunk and [DONE], a plain request with 503) and charged nothing. How many there were.
   */
  stopServing(): number {
    this.stopped = true
    const n = this.serving.size
    for (const cancel of this.serving) cancel.abort('stopping')
    return n
  }

  /** A request that ended before anything was served: its answer, once it is done. */
  private async answered(r: Admitted, finished: Finished, done: Done): Promise<Answer> {
    this.serving.delete(r.cancel)
    await done(finished)
    switch (finished.kind) {
      case 'closed':
        return { kind: 'gone' }
      case 'refused':
        return { kind: 'refused', error: finished.error }
      case 'broken':
      case 'delivered':
        // Neither comes before a commit; a delivered reply was recovered after its capture was lost, and is served.
        return finished.kind === 'delivered'
          ? { kind: 'serving', request: r, events: this.delivered(finished) }
          : { kind: 'refused', error: apiError('no_capacity', finished.message, { retryAfter: 1 }) }
    }
  }

  private async *events(r: Admitted, run: RouteRun, first: Committed | RouteOutcome, done: Done): ReplyEvents {
    let outcome: RouteOutcome | undefined = first.kind === 'committed' ? undefined : first
    let begun = false
    let finished: Finished | undefined
    try {
      if (first.kind === 'committed') {
        begun = true
        yield [{ type: 'start', offer: first.offer }, ...first.events]
        while (!outcome) {
          const next = await run.next()
          if (Array.isArray(next)) yield next
          else outcome = next
        }
      }
      const ended: RouteOutcome = outcome!
      r.trace.upstreamMs = this.deps.now() - r.trace.upstreamFrom!
      if (ended.kind === 'delivered') {
        yield completion(ended.reply, begun)
        begun = true
      }
      finished = await this.finish(r, ended)
    } catch (err) {
      finished = await this.recover(r, err, begun)
    } finally {
      // Returned (its client left) before it finished: charged for what reached it. The generator ends here.
      if (!finished) {
        if (!outcome) await run.abandon()
        const left: RouteOutcome = outcome ?? {
          kind: 'client_closed',
          reply: run.produced(),
          servedModel: first.kind === 'committed' ? first.servedModel : '',
        }
        finished = await this.finish(r, left).catch((err: unknown) => this.recover(r, err, begun))
        this.serving.delete(r.cancel)
        await done(finished)
      }
    }
    this.serving.delete(r.cancel)
    const remember = await done(finished)
    const last = lastEvent(finished, remember)
    if (last) yield [last]
  }

  /** A reply recovered as charged (its capture's answer lost, the capture committed): served whole. */
  private async *delivered(d: Delivered): ReplyEvents {
    yield completion(d.reply, false)
    yield [{ type: 'charged', delivered: d }]
  }

  /** Charges a route's outcome, and tells the trace. */
  private async finish(r: Admitted, outcome: RouteOutcome): Promise<Finished> {
    const finished = await charge(this.deps.charge, r, outcome)
    traceFinished(r.trace, finished, this.deps.charge.feeBps)
    return finished
  }

  /**
   * A bug or an unreachable store interrupted the request: log it and release its hold (best effort), charging
   * nothing; the usage record carries what the client was answered. Unless its capture had committed though the store's
   * answer was lost: then the reply it charged for is what the client gets.
   */
  async recover(r: Admitted, err: unknown, begun: boolean): Promise<Finished> {
    const now = this.deps.now()
    const outcome = begun && r.prepared.stream ? 'stream_interrupted' : 'no_capacity'
    const usage = requestUsage(r, now, outcome)
    const released = await this.deps.ledger.release(r.requestId, now, usage).catch(() => undefined)
    const charged = await chargedAfterAll(this.deps.charge.usage, r.caller.accountId, err, released)
    if (charged) {
      this.deps.log(
        `request ${r.requestId}: the store did not answer its capture, which had committed; ` +
          'the reply is delivered as charged',
      )
      traceFinished(r.trace, charged, this.deps.charge.feeBps)
      return charged
    }
    this.deps.log(`request ${r.requestId} failed`, err)
    const refused: Finished = { kind: 'refused', error: internalError(r.requestId) }
    traceFinished(r.trace, refused, this.deps.charge.feeBps)
    return refused
  }
}

/** The events of a whole reply not yet begun (its start and content), then its tool calls and finish. */
function completion(reply: Delivered['reply'], begun: boolean): ReplyEvent[] {
  const out: ReplyEvent[] = []
  if (!begun) {
    out.push({ type: 'start', offer: reply.offer })
    if (reply.reasoning !== '') out.push({ type: 'reasoning', text: reply.reasoning })
    if (reply.content !== '') {
      const content: ContentEvent = { type: 'content', text: reply.content }
      if (reply.logprobs) content.logprobs = reply.logprobs
      out.push(content)
    }
  }
  reply.toolCalls.forEach((call, index) => out.push({ type: 'tool_call', index, call }))
  out.push({ type: 'finish', reason: reply.finish, reply })
  return out
}

/** The last event of a reply that finished: charged, or failed; none for a client that left. */
function lastEvent(f: Finished, remember: Remember | undefined): ReplyEvent | undefined {
  switch (f.kind) {
    case 'delivered':
      return { type: 'charged', delivered: f, ...(remember ? { remember } : {}) }
    case 'refused':
      return {
        type: 'failed',
        code: f.error.code === 'provider_output_invalid' ? 'provider_output_invalid' : 'stream_interrupted',
        error: f.error,
      }
    case 'broken': {
      const code = f.code === 'provider_output_invalid' ? 'provider_output_invalid' : 'no_capacity'
      return { type: 'failed', code: f.code, error: apiError(code, f.message, { retryAfter: 1 }) }
    }
    case 'closed':
      return undefined
  }
}
