import type { CallPolicy, ToolRules } from '../tools/assemble.js'
import type { Offer } from './catalog.js'
import type { ManagedWhy, RoutePlan } from './route.js'
import {
  OfferAttempt,
  type AttemptContext,
  type AttemptEnd,
  type AttemptFailure,
  type BoundRequest,
  type PassedEvent,
  type Produced,
} from './attempt.js'

/** How a request's route ended: the reply, or why there is none. */
export type RouteOutcome =
  | { kind: 'delivered'; reply: Produced; servedModel: string; failedTargets: number; managedWhy?: ManagedWhy }
  | { kind: 'failed'; code: 'no_capacity' | 'provider_output_invalid'; attempts: AttemptFailure[] }
  | {
      kind: 'broken'
      code: 'stream_interrupted' | 'provider_output_invalid'
      detail: string
      reply: Produced
      servedModel: string
    }
  | { kind: 'client_closed'; reply?: Produced; servedModel?: string }

/** The route committed to an offer: its first content (a stream's), and the model it serves. */
export interface Committed {
  kind: 'committed'
  offer: Offer
  servedModel: string
  events: PassedEvent[]
}

/**
 * A request's plan, run as its consumer pulls (docs/architecture.md §5): `start` tries the offers in turn, each
 * target's then the vendor's, until one has content to send (it reads each attempt's first events before committing
 * to it, so that a failure before any reached the client fails over), or until one delivered a whole reply, or all
 * failed. Once committed, `next` reads the committed attempt on. A consumer that stops pulling calls `abandon`.
 */
export class RouteRun {
  private attempt: OfferAttempt | undefined
  private servedModel = ''
  private failedTargets = 0
  private managedWhy: ManagedWhy | undefined

  constructor(
    private readonly plan: RoutePlan,
    private readonly calls: CallPolicy,
    private readonly ctx: AttemptContext,
  ) {}

  async start(): Promise<Committed | RouteOutcome> {
    const failures: AttemptFailure[] = []
    for (const target of this.plan.targets) {
      const rules: ToolRules = { ...this.calls, maxArgumentBytes: target.model.tool_contract?.max_argument_bytes ?? 0 }
      const out = await this.tryOffers(target.offers, target.request, rules, target.model.id)
      if (out.kind === 'failed') {
        failures.push(...out.attempts)
        this.failedTargets++
        continue
      }
      return out
    }
    const invalidSeen = failures.some((a) => a.failure.kind === 'invalid_output')
    if (this.plan.managed && !this.ctx.cancel.aborted) {
      this.managedWhy =
        this.plan.targets.length === 0 ? 'no_candidate' : invalidSeen ? 'provider_output_invalid' : 'no_capacity'
      const { offer, request } = this.plan.managed
      const out = await this.tryOffers([offer], request, { ...this.calls, maxArgumentBytes: 0 }, offer.modelId)
      if (out.kind !== 'failed') return out
      failures.push(...out.attempts)
      return { kind: 'failed', code: 'no_capacity', attempts: failures }
    }
    if (this.ctx.cancel.aborted) return { kind: 'client_closed' }
    const code = invalidSeen && !this.plan.cortex ? 'provider_output_invalid' : 'no_capacity'
    return { kind: 'failed', code, attempts: failures }
  }

  /** The committed attempt's next content, or how the route ended. */
  async next(): Promise<PassedEvent[] | RouteOutcome> {
    const read = await this.attempt!.read()
    return Array.isArray(read) ? read : this.outcome(read)
  }

  /** What the committed attempt produced so far (none before a commit). */
  produced(): Produced | undefined {
    return this.attempt?.committed ? this.attempt.produced() : undefined
  }

  /** The consumer stops pulling: the committed attempt's upstream request is closed. */
  async abandon(): Promise<void> {
    await this.attempt?.abandon()
  }

  /** The offers of one target in turn, while nothing reached the client. */
  private async tryOffers(
    offers: readonly Offer[],
    request: BoundRequest,
    rules: ToolRules,
    model: string,
  ): Promise<Committed | RouteOutcome | { kind: 'failed'; attempts: AttemptFailure[] }> {
    const failures: AttemptFailure[] = []
    const { trace } = this.ctx
    for (const offer of offers) {
      if (this.ctx.cancel.aborted) return { kind: 'client_closed' }
      if (!this.ctx.health.acquire(offer.key, offer.maxConcurrency)) continue
      const attempt = new OfferAttempt(offer, request, rules, this.ctx)
      const first = await attempt.read()
      if (trace) trace.attempts++
      if (!Array.isArray(first) && first.kind === 'failed') {
        for (const a of first.attempts) trace?.failures.push(a.failure.kind)
        failures.push(...first.attempts)
        continue
      }
      this.attempt = attempt
      this.servedModel = model
      if (Array.isArray(first)) return { kind: 'committed', offer, servedModel: model, events: first }
      return this.outcome(first)
    }
    return { kind: 'failed', attempts: failures }
  }

  /** How the committed (or whole) attempt's end ends the route. */
  private outcome(end: Exclude<AttemptEnd, { kind: 'failed' }> | AttemptEnd): RouteOutcome {
    const servedModel = this.servedModel
    switch (end.kind) {
      case 'delivered': {
        const { failedTargets, managedWhy } = this
        return {
          kind: 'delivered',
          reply: end.reply,
          servedModel,
          failedTargets,
          ...(managedWhy ? { managedWhy } : {}),
        }
      }
      case 'broken':
        // A stream the upstream broke after content went out failed as surely as one that failed over.
        this.ctx.trace?.failures.push(end.code === 'stream_interrupted' ? 'interrupted' : 'invalid_output')
        return { ...end, servedModel }
      case 'client_closed':
        return { ...end, servedModel }
      case 'failed':
        // Only before a commit, which `tryOffers` fails over from.
        throw new Error('a committed attempt cannot fail over')
    }
  }
}
