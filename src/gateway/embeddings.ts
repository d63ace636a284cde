import { apiError, clipped, isApiError, unsupported, type ApiError } from '../protocol/errors.js'
import { readEmbeddingsRequest, type EmbeddingsRequest } from '../protocol/embeddings.js'
import { minBig, priceOf, splitFee } from '../money/usdc.js'
import { O200K } from '../metering/tokens.js'
import type { ModelConfig } from '../config-schema.js'
import type { Caller } from '../auth/caller.js'
import type { Catalog, Offer } from '../routing/catalog.js'
import type { Health } from '../routing/health.js'
import { planNamed, type RoutePlan } from '../routing/route.js'
import type { AttemptFailure } from '../routing/attempt.js'
import type { Cancel } from '../providers/cancel.js'
import type { Embedded } from '../providers/types.js'
import type { Outcome, UsageRecord } from '../store/usage.js'
import { requestUsage, type ChargeDeps } from './charge.js'
import { admit, type Admissible, type AdmissionStore } from './admission.js'
import type { InstanceLifecycle } from './lifecycle.js'
import type { RequestTrace } from './trace.js'
import type { KeylessCall, Paid, X402Payments } from './x402-payment.js'
import { failedError, internalError, noCapacityBeforeWork } from './refusals.js'

/** One embeddings request as the route hands it over. */
export interface EmbeddingsCall {
  body: unknown
  bodySha256: string | null
  caller: Caller
  requestId: string
  cancel: Cancel
  trace: RequestTrace
  headers: (h: Record<string, string>) => void
  keyless?: KeylessCall
}

/** An embeddings request's end: refused (nothing charged), or its vectors with what they cost. */
export type EmbeddingsResult =
  | { kind: 'refused'; error: ApiError }
  | {
      kind: 'served'
      request: EmbeddingsRequest
      vectors: number[][]
      promptTokens: number
      cost: bigint
      provider: string
    }

export interface EmbeddingsDeps {
  catalog: Catalog
  health: Health
  admission: AdmissionStore
  lifecycle: InstanceLifecycle
  charge: ChargeDeps
  holdTtlMs: number
  now: () => number
  log: (msg: string, err?: unknown) => void
  x402?: X402Payments
}

/** A checked embeddings request, planned and priced: what admission holds. */
interface PlannedEmbeddings extends Admissible {
  read: EmbeddingsRequest
  modelConfig: ModelConfig
  plan: RoutePlan
}

/**
 * `POST /v1/embeddings` (docs/architecture.md §2a): the chat request's life for a request with no output. Read and
 * checked, metered in the model's tokenizer, planned over the model's offers, admitted for its input at the plan's
 * highest input price (paid with x402 when it came without a key), sent to each offer in turn until one answers with
 * one valid vector per input, then charged for its input at the serving offer's price, recorded and receipted like
 * any request.
 */
export class EmbeddingsService {
  constructor(private readonly d: EmbeddingsDeps) {}

  async embed(call: EmbeddingsCall): Promise<EmbeddingsResult> {
    const startedAt = this.d.now()
    const planned = this.prepare(call.body)
    if (isApiError(planned)) return refused(call, planned)
    Object.assign(call.trace, { model: planned.model, stream: false, promptTokens: planned.inputTokens })
    if (planned.plan.targets[0]!.offers.length === 0) return refused(call, noCapacityBeforeWork(this.d.charge, planned))
    let caller = call.caller
    let paid: Paid | undefined
    if (call.keyless) {
      const payment = this.d.x402
        ? await this.d.x402.pay(call.requestId, planned, call.keyless, call.headers)
        : apiError('invalid_api_key', 'This gateway takes no x402 payments: send an API key.')
      if (isApiError(payment)) return refused(call, payment)
      paid = payment
      caller = payment.caller
    }
    const { requestId, cancel, trace, bodySha256 } = call
    const ctx: Ctx = { requestId, caller, startedAt, cancel, trace, bodySha256 }
    const held = await this.admit(ctx, planned)
    if (paid) await this.d.x402!.admitted(paid)
    if (isApiError(held)) return refused(call, held)
    return this.served(ctx, planned, held)
  }

  /** Reads, checks, meters and plans the request; refuses it as the client's fault otherwise. */
  private prepare(body: unknown): PlannedEmbeddings | ApiError {
    const read = readEmbeddingsRequest(body)
    if (isApiError(read)) return read
    const model = this.d.catalog.models.get(read.model)
    if (!model) {
      const message = `The model ${JSON.stringify(clipped(read.model))} does not exist. GET /v1/models lists the models.`
      return apiError('model_not_found', message, { param: 'model' })
    }
    const caps = model.capabilities
    if (caps.workload !== 'embedding')
      return unsupported('model', `${model.id} is a chat model; it serves /v1/chat/completions, not embeddings.`)
    if (read.dimensions !== undefined && read.dimensions !== caps.dimensions) {
      if (!caps.shortenable)
        return unsupported('dimensions', `${model.id} does not shorten its vectors${dimensionsOf(model)}.`)
      if (caps.dimensions !== undefined && read.dimensions > caps.dimensions)
        return unsupported('dimensions', `dimensions must be at most ${caps.dimensions} for ${model.id}.`)
    }
    const counter = this.d.catalog.counters.get(model.id) ?? O200K
    let inputTokens = 0
    for (const [i, input] of read.inputs.entries()) {
      const n = typeof input === 'string' ? counter.count(input, model.contextLimit + 1) : input.length
      if (n > model.contextLimit)
        return unsupported(
          'input',
          `input${read.inputs.length > 1 ? `[${i}]` : ''} is more than ${model.contextLimit} tokens, the most ${model.id} embeds at once.`,
        )
      inputTokens += n
    }
    const plan = planNamed({
      catalog: this.d.catalog,
      health: this.d.health,
      inputTokens,
      model,
      request: { bodyJson: '', stream: false, maxTokens: 0 },
      verified: { stateOf: this.d.catalog.stateOf, prefer: false, audit: false },
    })
    return { read, modelConfig: model, plan, model: model.id, inputTokens, maxTokens: 0, request: {} }
  }

  private async admit(ctx: Ctx, p: PlannedEmbeddings): Promise<bigint | ApiError> {
    const held = await admit(this.d.admission, ctx, p, {
      owner: this.d.lifecycle.id,
      now: ctx.startedAt,
      holdTtlMs: this.d.holdTtlMs,
    })
    if (isApiError(held)) return held
    this.d.lifecycle.admitted({
      requestId: ctx.requestId,
      accountId: ctx.caller.accountId,
      keyId: ctx.caller.keyId,
      model: p.model,
      stream: false,
      promptTokens: p.inputTokens,
      createdAt: ctx.startedAt,
    })
    return held.amount
  }

  /** Serves an admitted request and charges it; whatever goes wrong, its hold is closed (or left to expire). */
  private async served(ctx: Ctx, p: PlannedEmbeddings, hold: bigint): Promise<EmbeddingsResult> {
    try {
      const failures: AttemptFailure[] = []
      for (const offer of p.plan.targets[0]!.offers) {
        if (ctx.cancel.aborted) break
        const got = await this.attempt(offer, p, ctx.cancel)
        ctx.trace.attempts++
        if (got.kind === 'failed') {
          ctx.trace.failures.push(got.failure.kind)
          failures.push({ offer, failure: got.failure })
          continue
        }
        return await this.charged(ctx, p, hold, { offer, got })
      }
      const closed = ctx.cancel.aborted
      await this.d.admission.ledger.release(
        ctx.requestId,
        this.d.now(),
        this.usage(ctx, p, closed ? 'client_closed' : 'no_capacity'),
      )
      if (closed) return { kind: 'refused', error: apiError('no_capacity', 'The client left.') }
      const invalid = failures.some((f) => f.failure.kind === 'invalid_output')
      const code = invalid ? 'provider_output_invalid' : 'no_capacity'
      return refused(ctx, failedError(this.d.charge, p, { kind: 'failed', code, attempts: failures }))
    } catch (err) {
      this.d.log(`request ${ctx.requestId}: embeddings failed inside the gateway`, err)
      await this.d.admission.ledger
        .release(ctx.requestId, this.d.now(), this.usage(ctx, p, 'no_capacity'))
        .catch(() => undefined)
      return refused(ctx, internalError(ctx.requestId))
    } finally {
      this.d.lifecycle.released(ctx.requestId)
    }
  }

  /** One offer's answer, its vectors checked against the model's length; counted in the offer's health. */
  private async attempt(offer: Offer, p: PlannedEmbeddings, cancel: Cancel): Promise<Embedded> {
    if (!this.d.health.acquire(offer.key, offer.maxConcurrency))
      return { kind: 'failed', failure: { kind: 'unavailable', detail: 'at its concurrency limit' } }
    const started = this.d.now()
    let got: Embedded = offer.upstream.embed
      ? await offer.upstream.embed(
          offer.upstreamModel,
          { inputs: p.read.inputs, ...(p.read.dimensions !== undefined ? { dimensions: p.read.dimensions } : {}) },
          cancel,
        )
      : { kind: 'failed', failure: { kind: 'unavailable', detail: 'this upstream serves no embeddings' } }
    const length = p.read.dimensions ?? p.modelConfig.capabilities.dimensions
    if (got.kind === 'embedded' && length !== undefined && got.vectors[0]!.length !== length)
      got = {
        kind: 'failed',
        failure: { kind: 'invalid_output', detail: `vectors of ${got.vectors[0]!.length} numbers, not ${length}` },
      }
    const outcome = got.kind === 'embedded' ? 'success' : got.failure.kind === 'aborted' ? 'neutral' : 'failure'
    this.d.health.release(offer.key, outcome, this.d.now() - started)
    return got
  }

  /** Charges the input at the serving offer's price (never above the hold) and records it. */
  private async charged(
    ctx: Ctx,
    p: PlannedEmbeddings,
    hold: bigint,
    { offer, got }: { offer: Offer; got: Extract<Embedded, { kind: 'embedded' }> },
  ): Promise<EmbeddingsResult> {
    const s = this.d.charge
    const cost = minBig(priceOf(offer.prices, p.inputTokens, 0), hold)
    const { fee } = splitFee(cost, s.feeBps)
    const payeeId = offer.payeeId ?? s.accounts.payees.get(offer.provider)
    if (payeeId === undefined) throw new Error(`no account for provider ${offer.provider}`)
    const usage = this.usage(ctx, p, 'completed', {
      servedModel: p.model,
      provider: offer.provider,
      cost,
      prices: offer.prices,
      upstreamPromptTokens: got.promptTokens,
    })
    const captured = await s.ledger.capture({
      requestId: ctx.requestId,
      cost,
      payeeId,
      fee,
      feeAccountId: s.accounts.fees,
      now: this.d.now(),
      usage,
    })
    if (!captured) s.log(`capture of ${ctx.requestId} found its hold closed; delivered without charge`)
    ctx.trace.outcome = 'completed'
    return {
      kind: 'served',
      request: p.read,
      vectors: got.vectors,
      promptTokens: p.inputTokens,
      cost: captured ? cost : 0n,
      provider: offer.provider,
    }
  }

  private usage(ctx: Ctx, p: PlannedEmbeddings, outcome: Outcome, extra: Partial<UsageRecord> = {}): UsageRecord {
    const prepared = { model: p.model, stream: false, inputTokens: p.inputTokens }
    return requestUsage({ ...ctx, prepared }, this.d.now(), outcome, extra)
  }
}

interface Ctx {
  requestId: string
  caller: Caller
  startedAt: number
  cancel: Cancel
  trace: RequestTrace
  bodySha256?: string | null
}

const dimensionsOf = (m: ModelConfig) =>
  m.capabilities.dimensions === undefined ? '' : `: its vectors have ${m.capabilities.dimensions} numbers`

function refused(call: { trace: RequestTrace }, error: ApiError): EmbeddingsResult {
  call.trace.outcome = error.code
  return { kind: 'refused', error }
}
