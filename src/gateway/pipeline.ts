import { apiError, isApiError, type ApiError } from '../protocol/errors.js'
import { CountAbandoned } from '../metering/tokens.js'
import { planOfferCount } from '../routing/route.js'
import type { Catalog } from '../routing/catalog.js'
import type { Health } from '../routing/health.js'
import type { LedgerRepo } from '../store/ledger/repo.js'
import type { Cancel } from '../providers/cancel.js'
import { admit, type AdmissionStore } from './admission.js'
import type { ChargeDeps, Finished } from './charge.js'
import { internalError, noCapacityBeforeWork } from './refusals.js'
import type { Caller } from '../auth/caller.js'
import type { Admitted, RequestContext } from './context.js'
import type { InstanceLifecycle } from './lifecycle.js'
import type { Idempotency, Remember } from './idempotency.js'
import type { RequestTrace } from './trace.js'
import type { RefusalCounter } from './refusal-counter.js'
import { prepare, type Prepared } from './prepare.js'
import { RateInHold, correctRate, takeRate, type CountedRate } from './rate-stage.js'
import type { RateGate } from '../limits/rate-gate.js'
import { Serving } from './serving.js'
import type { Answer, ChatResult } from './reply-events.js'
import type { KeylessCall, Paid, X402Payments } from './x402-payment.js'

export type { Answer, ChatResult, ReplyEvent, ReplyEvents } from './reply-events.js'

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
  /** The `Idempotency-Key` header, when sent; its retry must repeat `keyedBody` (the body as the client sent it). */
  idempotencyKey?: string
  keyedBody?: unknown
  /** Filled in as the request goes: for its access line and metrics. */
  trace: RequestTrace
  /** Headers every reply to the request carries from here on (a limited key's rate headers). */
  headers?: (h: Record<string, string>) => void
  /** The marketplace's audit of one offer (`provider.only`): routed to it whatever the audits found of it. */
  audit?: true
  /** A request without a key, paid per request with x402 (`caller` is then `KEYLESS` until it paid). */
  keyless?: KeylessCall
}

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
  /** Payments of keyless requests, on a rail that takes them (`rail.x402`). */
  x402?: X402Payments
}

/** Once a request finished: how its idempotency key (if any) ends; keeps a plain reply when it may be replayed. */
type KeyEnd = (finished: Finished | undefined, stream: boolean) => Promise<Remember | undefined>

/**
 * A chat request's life, one method per stage over one request context: prepare, admit, then serve (`Serving`: run
 * with failover, charge, recover). Money is decided here, never by the HTTP layer.
 */
export class ChatPipeline {
  private readonly serving: Serving

  constructor(private readonly deps: PipelineDeps) {
    this.serving = new Serving(deps)
  }

  async chat(call: ChatCall): Promise<ChatResult> {
    if (call.idempotencyKey === undefined) return this.admitChat(call, undefined)
    const keyed = call.keyedBody ?? call.body
    const idem = await this.deps.idempotency.begin(call.caller, call.idempotencyKey, keyed, call.requestId)
    if (idem.kind !== 'run') return idem
    let result: ChatResult | undefined
    try {
      result = await this.admitChat(call, idem.finish)
      return result
    } finally {
      // Refused before admission (or failed there): the key is free again. An admitted request ends its key when done.
      if (result?.kind !== 'admitted') await idem.finish(undefined, false)
    }
  }

  private async admitChat(call: ChatCall, keyEnd: KeyEnd | undefined): Promise<ChatResult> {
    let ctx: RequestContext = {
      requestId: call.requestId,
      caller: call.caller,
      startedAt: this.deps.now(),
      cancel: call.cancel,
      trace: call.trace,
      bodySha256: call.bodySha256 ?? null,
    }
    const prepared = await this.prepare(call)
    if (prepared === undefined) return { kind: 'gone' }
    if (isApiError(prepared)) return refused(ctx, prepared)
    Object.assign(ctx.trace, { model: prepared.model, stream: prepared.stream, promptTokens: prepared.inputTokens })
    if (planOfferCount(prepared.plan) === 0) {
      this.countRefusal(ctx, prepared, 'no_capacity')
      return refused(ctx, noCapacityBeforeWork(this.deps.charge, prepared))
    }
    let paid: Paid | undefined
    if (call.keyless) {
      // Paid before any work: the payment, once mined, is the prepaid account's, which the hold is then taken on.
      const payment = this.deps.x402
        ? await this.deps.x402.pay(ctx.requestId, prepared, call.keyless, call.headers ?? (() => {}))
        : apiError('invalid_api_key', 'This gateway takes no x402 payments: send an API key.')
      if (isApiError(payment)) return refused(ctx, payment)
      paid = payment
      ctx = { ...ctx, caller: payment.caller }
    }
    const taken = await takeRate(this.deps.rates, ctx.caller, prepared, call.headers)
    if (isApiError(taken)) return refused(ctx, taken)
    const admitted = await this.admit(ctx, prepared, taken instanceof RateInHold ? taken : undefined)
    if (paid) await this.deps.x402!.admitted(paid)
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
    const answer: Promise<Answer> = this.serving.answer(admitted, (finished) =>
      this.done(admitted, rate, finished, keyEnd),
    )
    return { kind: 'admitted', request: admitted, answer }
  }

  /** An admitted request finished: its lease ends, its rate count is corrected, and its idempotency key ends. */
  private async done(
    r: Admitted,
    rate: CountedRate | undefined,
    finished: Finished | undefined,
    keyEnd: KeyEnd | undefined,
  ): Promise<Remember | undefined> {
    this.deps.lifecycle.released(r.requestId)
    await correctRate(rate, r.prepared, finished)
    return keyEnd?.(finished, r.prepared.stream)
  }

  /** Validates, meters and plans; undefined when the client left while its long prompt was counted. */
  private async prepare(call: ChatCall): Promise<Prepared | ApiError | undefined> {
    try {
      return await prepare(call.body, this.deps.catalog, this.deps.health, {
        abandoned: call.gone,
        audit: call.audit === true,
      })
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
      await this.serving.recover({ ...ctx, prepared, hold: 0n }, err, false)
      return internalError(ctx.requestId)
    }
    if (isApiError(result)) {
      if (result.code === 'insufficient_quota') this.countRefusal(ctx, prepared, 'insufficient_quota')
      return result
    }
    return { ...ctx, prepared, hold: result.amount }
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
    return this.serving.stopServing()
  }
}

function refused(ctx: RequestContext, error: ApiError): ChatResult {
  ctx.trace.outcome = error.code
  return { kind: 'refused', error }
}
