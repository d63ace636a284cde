import { isApiError, type ApiError } from '../protocol/errors.js'
import { CountAbandoned } from '../metering/tokens.js'
import { executeRoute, planOfferCount } from '../routing/route.js'
import type { StreamSink } from '../routing/failover.js'
import type { Catalog } from '../routing/catalog.js'
import type { Health } from '../routing/health.js'
import type { LedgerRepo } from '../store/ledger/repo.js'
import type { Cancel } from '../providers/cancel.js'
import { admit, type AdmissionStore } from './admission.js'
import { charge, landed, requestUsage, type ChargeDeps, type Delivered, type Finished } from './charge.js'
import { internalError, noCapacityBeforeWork } from './refusals.js'
import type { Caller } from '../auth/caller.js'
import type { Admitted, RequestContext } from './context.js'
import type { InstanceLifecycle } from './lifecycle.js'
import type { Idempotency, Remember } from './idempotency.js'
import { traceFinished, type RequestTrace } from './trace.js'
import type { RefusalCounter } from './refusal-counter.js'
import { prepare, type Prepared } from './prepare.js'
import { RateInHold, correctRate, takeRate } from './rate-stage.js'
import type { RateGate } from '../limits/rate-gate.js'

/** A stream's sink as the pipeline sees it: whether its status line went out decides how a failure is told. */
export interface OpenedStream extends StreamSink {
  readonly headersSent: boolean
}

/** One chat request as the route hands it over. */
export interface ChatCall {
  body: unknown
  /** SHA-256 (hex) of the body as received, for the request's receipt. */
  bodySha256?: string | null
  caller: Caller
  requestId: string
  cancel: Cancel
  /** Whether the client has gone: a long prompt's count stops for no one. */
  gone: () => boolean
  /** Opens the stream's sink once the request is admitted (a streamed request only). */
  openStream: (r: Admitted) => OpenedStream
  /** The `Idempotency-Key` header, when sent; its retry must repeat `keyedBody` (the body as the client sent it). */
  idempotencyKey?: string
  keyedBody?: unknown
  /** Filled in as the request goes: for its access line and metrics. */
  trace: RequestTrace
  /** Headers every reply to the request carries from here on (a limited key's rate headers). */
  headers?: (h: Record<string, string>) => void
}

/** How a chat request ended, for the route to encode. */
export type ChatResult =
  /** Refused before any money was held, or failed inside the gateway with nothing charged. */
  | { kind: 'refused'; error: ApiError }
  /**
   * Admitted and served: what the client gets, charged as `finished` says. `remember`, under an idempotency key: keeps
   * the encoded plain reply for a retry, before it is sent.
   */
  | { kind: 'finished'; request: Admitted; finished: Finished; stream?: OpenedStream; remember?: Remember }
  /** Its idempotency key's first request finished with this reply: sent again, nothing run or charged. */
  | { kind: 'replay'; status: number; body: string; firstRequestId: string }
  /** Its client left while it was being checked: no one to answer, nothing held. */
  | { kind: 'abandoned' }

export interface PipelineDeps {
  idempotency: Idempotency
  refusals: RefusalCounter
  catalog: Catalog
  health: Health
  ledger: LedgerRepo
  admission: AdmissionStore
  lifecycle: InstanceLifecycle
  charge: ChargeDeps
  holdTtlMs: number
  now: () => number
  log: (msg: string, err?: unknown) => void
  /** Per-key rate limits. */
  rates?: RateGate
}

/**
 * A chat request's life, one method per stage over one request context: prepare, admit, run with failover, charge,
 * and recover from an internal failure. Money is decided here, never by the HTTP layer.
 */
export class ChatPipeline {
  /** The cancels of the requests being served: the stop's grace ends them. */
  private readonly serving = new Set<Cancel>()
  private servingStopped = false

  constructor(private readonly deps: PipelineDeps) {}

  async chat(call: ChatCall): Promise<ChatResult> {
    if (call.idempotencyKey === undefined) return this.serveChat(call)
    const keyed = call.keyedBody ?? call.body
    const idem = await this.deps.idempotency.begin(call.caller, call.idempotencyKey, keyed, call.requestId)
    if (idem.kind !== 'run') return idem
    let result: ChatResult | undefined
    try {
      result = await this.serveChat(call)
    } finally {
      const finished = result?.kind === 'finished' ? result.finished : undefined
      const remember = await idem.settle(finished, result?.kind === 'finished' && result.stream !== undefined)
      if (remember && result?.kind === 'finished') result.remember = remember
    }
    return result
  }

  private async serveChat(call: ChatCall): Promise<ChatResult> {
    const ctx: RequestContext = {
      requestId: call.requestId,
      caller: call.caller,
      startedAt: this.deps.now(),
      cancel: call.cancel,
      trace: call.trace,
      bodySha256: call.bodySha256 ?? null,
    }
    const prepared = await this.prepare(call)
    if (prepared === undefined) return { kind: 'abandoned' }
    if (isApiError(prepared)) return refused(ctx, prepared)
    Object.assign(ctx.trace, { model: prepared.model, stream: prepared.stream, promptTokens: prepared.inputTokens })
    if (planOfferCount(prepared.plan) === 0) {
      this.countRefusal(ctx, prepared, 'no_capacity')
      return refused(ctx, noCapacityBeforeWork(this.deps.charge, prepared))
    }
    const taken = await takeRate(this.deps.rates, ctx.caller, prepared, call.headers)
    if (isApiError(taken)) return refused(ctx, taken)
    const admitted = await this.admit(ctx, prepared, taken instanceof RateInHold ? taken : undefined)
    const rate = taken instanceof RateInHold ? taken.counted : taken
    if (isApiError(admitted)) {
      await correctRate(rate, prepared, undefined)
      return refused(ctx, admitted)
    }
    // Its hold's lease is extended while it is served; a hold its request leaves open (a failed release) expires.
    this.deps.lifecycle.admitted({
      requestId: ctx.requestId,
      accountId: ctx.caller.accountId,
      keyId: ctx.caller.keyId,
      model: prepared.model,
      stream: prepared.stream,
      promptTokens: prepared.inputTokens,
      createdAt: ctx.startedAt,
    })
    let finished: Finished | undefined
    try {
      const stream = prepared.stream ? call.openStream(admitted) : undefined
      finished = await this.serve(admitted, stream)
      return { kind: 'finished', request: admitted, finished, ...(stream ? { stream } : {}) }
    } finally {
      this.deps.lifecycle.released(ctx.requestId)
      await correctRate(rate, prepared, finished)
    }
  }

  /** Validates, meters and plans; undefined when the client left while its long prompt was counted. */
  private async prepare(call: ChatCall): Promise<Prepared | ApiError | undefined> {
    try {
      return await prepare(call.body, this.deps.catalog, this.deps.health, call.gone)
    } catch (err) {
      if (err instanceof CountAbandoned) return undefined
      throw err
    }
  }

  /** Holds the request's maximum cost, or refuses it; a store that fails is recovered from (its hold released). */
  private async admit(ctx: RequestContext, prepared: Prepared, rate?: RateInHold): Promise<Admitted | ApiError> {
    let result: Awaited<ReturnType<typeof admit>>
    try {
      result = await admit(this.deps.admission, ctx, prepared, {
        owner: this.deps.lifecycle.id,
        now: ctx.startedAt,
        holdTtlMs: this.deps.holdTtlMs,
        ...(rate ? { rate } : {}),
      })
    } catch (err) {
      // The hold may have been written before the store failed: release it, or the live instance would keep it.
      await this.recover({ ...ctx, prepared, hold: 0n }, err, 'no_capacity')
      return internalError(ctx.requestId)
    }
    if (isApiError(result)) {
      if (result.code === 'insufficient_quota') this.countRefusal(ctx, prepared, 'insufficient_quota')
      return result
    }
    return { ...ctx, prepared, hold: result.amount }
  }

  /** Runs the admitted request through its plan, then charges what was delivered; an internal failure is recovered. */
  private async serve(r: Admitted, stream: OpenedStream | undefined): Promise<Finished> {
    try {
      return await this.run(r, stream)
    } catch (err) {
      const charged = await this.recover(r, err, stream?.headersSent ? 'stream_interrupted' : 'no_capacity')
      return charged ?? { kind: 'refused', error: internalError(r.requestId) }
    }
  }

  private async run(r: Admitted, sink: StreamSink | undefined): Promise<Finished> {
    this.serving.add(r.cancel)
    // One that reaches its upstream after the grace ended (its body or hold came late) is ended at once, the same way.
    if (this.servingStopped) r.cancel.abort('stopping')
    try {
      const { health, now } = this.deps
      const { reachability } = this.deps.charge
      const ctx = { cancel: r.cancel, health, reachability, now, trace: r.trace, ...(sink ? { sink } : {}) }
      const upstreamFrom = (r.trace.upstreamFrom = now())
      const outcome = await executeRoute(r.prepared.plan, r.prepared.calls, ctx)
      r.trace.upstreamMs = now() - upstreamFrom
      if (outcome.kind === 'delivered') sink?.complete(outcome.reply)
      const finished = await charge(this.deps.charge, r, outcome)
      traceFinished(r.trace, finished, this.deps.charge.feeBps)
      return finished
    } finally {
      this.serving.delete(r.cancel)
    }
  }

  /**
   * A bug or an unreachable store interrupted the request: log it and release its hold (best effort), charging
   * nothing; the usage record carries what the client was answered. Unless its capture had landed though the store's
   * answer was lost: then the reply it charged for is what the client gets.
   */
  private async recover(
    r: Admitted,
    err: unknown,
    outcome: 'no_capacity' | 'stream_interrupted',
  ): Promise<Delivered | undefined> {
    const now = this.deps.now()
    const usage = requestUsage(r, now, outcome)
    const released = await this.deps.ledger.release(r.requestId, now, usage).catch(() => undefined)
    const charged = await landed(this.deps.charge.usage, r.caller.accountId, err, released)
    if (charged)
      this.deps.log(
        `request ${r.requestId}: the store did not answer its capture, which had landed; ` +
          'the reply is delivered as charged',
      )
    else this.deps.log(`request ${r.requestId} failed`, err)
    return charged
  }

  /** A refusal before admission is counted, not recorded one by one (`RefusalCounter`). */
  private countRefusal(ctx: RequestContext, prepared: Prepared, code: 'no_capacity' | 'insufficient_quota'): void {
    const { accountId, keyId } = ctx.caller
    this.deps.refusals.count({ accountId, keyId, model: prepared.model, code }, this.deps.now())
  }

  /**
   * The stop's grace is over: requests still being served end now, each answered as a failure to retry (a stream with
   * an error chunk and [DONE], a plain request with 503) and charged nothing. How many there were.
   */
  stopServing(): number {
    this.servingStopped = true
    const n = this.serving.size
    for (const cancel of this.serving) cancel.abort('stopping')
    return n
  }
}

function refused(ctx: RequestContext, error: ApiError): ChatResult {
  ctx.trace.outcome = error.code
  return { kind: 'refused', error }
}
