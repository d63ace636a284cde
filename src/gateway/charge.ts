import type { Usage } from '../protocol/chat.js'
import { apiError, type ApiError } from '../protocol/errors.js'
import { countOutput } from '../metering/tokens.js'
import { minBig, priceOf, splitFee } from '../money/usdc.js'
import { CloseUnanswered, type CaptureRequest } from '../store/ledger/types.js'
import type { LedgerRepo } from '../store/ledger/repo.js'
import type { Outcome, UsageRecord, UsageRepo } from '../store/usage.js'
import type { Produced } from '../routing/attempt.js'
import type { RouteOutcome } from '../routing/route-run.js'
import type { Health } from '../routing/health.js'
import type { Reachability } from '../routing/reachability.js'
import { failedError } from './refusals.js'
import type { Admitted } from './context.js'

/** What charging a request reads and writes: the ledger, the fee, and the accounts it pays. */
export interface ChargeDeps {
  ledger: LedgerRepo
  usage: UsageRepo
  health: Health
  reachability: Reachability
  feeBps: number
  /** Account ids of the fee account, the vendor account and each provider address. */
  accounts: { fees: number; vendor: number; payees: ReadonlyMap<string, number> }
  now: () => number
  log: (msg: string) => void
}

/** What the client gets once its request is charged. */
export type Finished =
  | {
      kind: 'delivered'
      reply: Produced
      servedModel: string
      usage: Usage
      cost: bigint
      failedTargets: number
      managedWhy?: string
    }
  | { kind: 'refused'; error: ApiError }
  /** Broken after content went out; `provider` broke it (none when the gateway stopped it). */
  | { kind: 'broken'; code: 'stream_interrupted' | 'provider_output_invalid'; message: string; provider?: string }
  /** The client left; `charged` when it was sent content, which it pays for (`paid` says what and to whom). */
  | {
      kind: 'closed'
      charged: boolean
      paid?: { provider: string; completionTokens: number; cost: bigint; fee: bigint }
    }

/** The usage record of a request as admitted: nothing served or charged yet; `extra` says what was. */
export function requestUsage(
  r: Pick<Admitted, 'requestId' | 'caller' | 'startedAt' | 'bodySha256'> & {
    prepared: Pick<Admitted['prepared'], 'model' | 'stream' | 'inputTokens'>
  },
  now: number,
  outcome: Outcome,
  extra: Partial<UsageRecord> = {},
): UsageRecord {
  const p = r.prepared
  return {
    requestId: r.requestId,
    accountId: r.caller.accountId,
    keyId: r.caller.keyId,
    model: p.model,
    servedModel: null,
    provider: null,
    stream: p.stream,
    promptTokens: p.inputTokens,
    completionTokens: 0,
    upstreamPromptTokens: null,
    upstreamCompletionTokens: null,
    cost: 0n,
    outcome,
    latencyMs: now - r.startedAt,
    createdAt: r.startedAt,
    bodySha256: r.bodySha256 ?? null,
    ...extra,
  }
}

/**
 * Charges a request from its route outcome: capture the price of what was delivered and release the rest; release
 * everything when nothing was delivered or the stream broke. One usage record either way.
 */
export async function charge(s: ChargeDeps, r: Admitted, outcome: RouteOutcome): Promise<Finished> {
  const p = r.prepared
  const base = (o: Outcome, extra: Partial<UsageRecord> = {}): UsageRecord => requestUsage(r, s.now(), o, extra)
  switch (outcome.kind) {
    case 'delivered': {
      const charge = chargeOf(s, r, { reply: outcome.reply, servedModel: outcome.servedModel }, 'completed')
      checkReply(s, outcome.reply, charge.counted)
      const delivered: Delivered = {
        kind: 'delivered',
        reply: outcome.reply,
        servedModel: outcome.servedModel,
        usage: charge.usage,
        cost: charge.cost,
        failedTargets: outcome.failedTargets,
        ...(outcome.managedWhy ? { managedWhy: outcome.managedWhy } : {}),
      }
      let captured: boolean
      try {
        captured = await capture(s, charge.capture)
      } catch (err) {
        throw err instanceof CloseUnanswered ? new CaptureInDoubt(delivered, err) : err
      }
      return captured ? delivered : { ...delivered, cost: 0n }
    }
    case 'client_closed': {
      if (r.cancel.cause === 'stopping') return stoppedUnderway(s, r, outcome, base)
      // The client pays for what reached it, and nothing when nothing did.
      if (outcome.reply && saidAny(outcome.reply)) {
        const sent = { ...outcome.reply, toolCalls: [] }
        const c = chargeOf(s, r, { reply: sent, servedModel: outcome.servedModel ?? null }, 'client_closed')
        if (!(await capture(s, c.capture))) return { kind: 'closed', charged: false }
        const { fee } = c.capture
        const paid = { provider: sent.offer.provider, completionTokens: c.usage.completion_tokens, cost: c.cost, fee }
        return { kind: 'closed', charged: true, paid }
      }
      await s.ledger.release(r.requestId, s.now(), base('client_closed'))
      return { kind: 'closed', charged: false }
    }
    case 'broken': {
      await s.ledger.release(
        r.requestId,
        s.now(),
        base(outcome.code, { servedModel: outcome.servedModel, provider: outcome.reply.offer.provider }),
      )
      const message =
        outcome.code === 'stream_interrupted'
          ? `The provider stopped before the reply was complete (${outcome.detail}). Nothing was charged.`
          : `The provider sent output the marketplace refused to deliver (${outcome.detail}). Nothing was charged.`
      return { kind: 'broken', code: outcome.code, message, provider: outcome.reply.offer.provider }
    }
    case 'failed': {
      await s.ledger.release(r.requestId, s.now(), base(outcome.code))
      return { kind: 'refused', error: failedError(s, p, outcome) }
    }
  }
}

/** Whether any of the reply reached its client as it came: content or reasoning. */
function saidAny(reply: Produced): boolean {
  return reply.content.length > 0 || reply.reasoning.length > 0
}

/** What a delivered reply costs, and the capture that charges it. */
function chargeOf(
  s: ChargeDeps,
  r: Admitted,
  { reply, servedModel }: { reply: Produced; servedModel: string | null },
  outcome: Outcome,
): { usage: Usage; cost: bigint; capture: CaptureRequest; counted: number } {
  // max_tokens bounds the output and the charge (docs/interface.md §4.1): an upstream that overruns it is billed, and
  // reported, as if it had stopped there, at the price of the offer that served. The bound is the one that offer was
  // sent (targets of svc/cortex@1 may be sent less than the hold covers).
  // Reasoning is output, charged at the output price, and counted first: it came first.
  // In the served model's tokenizer (its own under metering version 2).
  const counter = reply.offer.counter
  const reasoning =
    reply.reasoning === '' ? 0 : Math.min(countOutput(reply.reasoning, [], reply.maxTokens, counter), reply.maxTokens)
  const counted =
    reasoning +
    countOutput(
      reply.content,
      reply.toolCalls.map((c) => c.function),
      reply.maxTokens - reasoning,
      counter,
    )
  const completion = Math.min(counted, reply.maxTokens)
  const usage: Usage = {
    prompt_tokens: r.prepared.inputTokens,
    completion_tokens: completion,
    total_tokens: r.prepared.inputTokens + completion,
    ...(reply.reasoning === '' ? {} : { completion_tokens_details: { reasoning_tokens: reasoning } }),
  }
  // Never more than was held, whatever else happens.
  const cost = minBig(priceOf(reply.offer.prices, usage.prompt_tokens, usage.completion_tokens), r.hold)
  const managed = reply.offer.managed
  const { fee } = managed ? { fee: 0n } : splitFee(cost, s.feeBps)
  const payeeId = managed ? s.accounts.vendor : (reply.offer.payeeId ?? s.accounts.payees.get(reply.offer.provider))
  if (payeeId === undefined) throw new Error(`no account for provider ${reply.offer.provider}`)
  const capture: CaptureRequest = {
    requestId: r.requestId,
    cost,
    payeeId,
    fee,
    feeAccountId: s.accounts.fees,
    now: s.now(),
    usage: requestUsage(r, s.now(), outcome, {
      servedModel,
      provider: reply.offer.provider,
      completionTokens: completion,
      cost,
      prices: reply.offer.prices,
      upstreamPromptTokens: reply.upstreamUsage?.promptTokens ?? null,
      upstreamCompletionTokens: reply.upstreamUsage?.completionTokens ?? null,
    }),
  }
  return { usage, cost, capture, counted }
}

/** A delivered reply's usage and finish reason, checked against the gateway's count for its offer's evidence. */
function checkReply(s: ChargeDeps, reply: Produced, counted: number): void {
  s.health.checks.record(reply.offer.key, {
    reported: reply.upstreamUsage?.completionTokens,
    counted,
    // Counted only up to just past the bound: a reply at it is not compared.
    comparable: reply.offer.ownTokenizer && reply.toolCalls.length === 0 && counted < reply.maxTokens,
    finish: reply.finish,
    maxTokens: reply.maxTokens,
  })
}

/**
 * Charges it; false when the hold was already closed (a sweeper released it after its lease lapsed): nothing was
 * charged, so the reply must not claim a charge. The usage record is the sweeper's.
 */
async function capture(s: ChargeDeps, c: CaptureRequest): Promise<boolean> {
  const captured = await s.ledger.capture(c)
  if (!captured) s.log(`capture of ${c.requestId} found its hold closed; delivered without charge`)
  return captured
}

export type Delivered = Extract<Finished, { kind: 'delivered' }>

/** How a delivered request was routed: `available`, `failover:<n>` (targets that failed first) or `managed:<why>`. */
export function routingStatus(d: Delivered): string {
  if (d.managedWhy) return `managed:${d.managedWhy}`
  return d.failedTargets > 0 ? `failover:${d.failedTargets}` : 'available'
}

/**
 * A delivered reply whose capture the store never answered: it may have charged. The pipeline finds out which
 * (`chargedAfterAll`) before it answers: the reply and its charge, or an error and nothing charged; an error after a
 * charge only when the store cannot be read at all (the error then says to check GET /v1/usage/{id} before retrying).
 */
export class CaptureInDoubt extends Error {
  readonly requestId: string

  constructor(
    readonly finished: Delivered,
    cause: CloseUnanswered,
  ) {
    super(cause.message, { cause })
    this.requestId = cause.requestId
  }
}

/**
 * After its request's charge failed, released (nothing charged) or not: the reply to deliver as charged when a capture
 * in doubt had committed, else undefined. The request's record tells (the capture alone writes it completed, with its
 * cost); it is read twice before giving up (docs/architecture.md §15.28).
 */
export async function chargedAfterAll(
  usage: UsageRepo,
  accountId: number,
  err: unknown,
  released: boolean | undefined,
): Promise<Delivered | undefined> {
  // A release that threw (its answer lost as well, most likely) proves nothing either way: the record tells.
  if (!(err instanceof CaptureInDoubt) || released === true) return undefined
  const read = () => usage.get(accountId, err.requestId)
  const record = await read()
    .catch(read)
    .catch(() => undefined)
  return record?.outcome === 'completed' && record.cost === err.finished.cost ? err.finished : undefined
}

/**
 * A request the gateway stopped serving when its shutdown grace ran out: its client is still there and is told so, to
 * retry elsewhere, and is charged nothing (as for a stream an upstream broke, docs/architecture.md §4): a stream that
 * had begun ends with `stream_interrupted`, anything else is refused with 503.
 */
async function stoppedUnderway(
  s: ChargeDeps,
  r: Admitted,
  outcome: Extract<RouteOutcome, { kind: 'client_closed' }>,
  base: (o: Outcome, extra?: Partial<UsageRecord>) => UsageRecord,
): Promise<Finished> {
  const reply = outcome.reply
  const begun = reply !== undefined && saidAny(reply)
  const served = begun ? { servedModel: outcome.servedModel ?? null, provider: reply.offer.provider } : {}
  await s.ledger.release(r.requestId, s.now(), base(begun ? 'stream_interrupted' : 'no_capacity', served))
  const message = 'The gateway is stopping and could not finish this request in time. Nothing was charged; retry.'
  return begun
    ? { kind: 'broken', code: 'stream_interrupted', message, provider: reply.offer.provider }
    : { kind: 'refused', error: apiError('no_capacity', message, { retryAfter: 1 }) }
}
