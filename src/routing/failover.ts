import type { FinishReason, ToolCall } from '../protocol/chat.js'
import type { Failure, UpstreamEvent, UpstreamRequest } from '../providers/types.js'
import type { Cancel } from '../providers/cancel.js'
import { OutputBound } from '../metering/output-bound.js'
import { ToolCallAssembler, invalidToolCall, type ToolRules } from '../tools/assemble.js'
import type { Offer } from './catalog.js'
import type { Health } from './health.js'
import type { Reachability } from './reachability.js'

/** Where streamed content goes as it arrives. The first content commits the reply to the offer that sent it. */
export interface StreamSink {
  readonly committed: boolean
  content(offer: Offer, text: string, logprobs?: readonly unknown[]): void
  /** The client has not taken what it was sent: nothing more is read from the upstream until `drained()`. */
  readonly backlogged: boolean
  /** Resolves once the client has taken what it was sent, is gone, or `cancel` fires (the gateway stopping). */
  drained(cancel: Cancel): Promise<void>
  /** The reply is whole and is about to be charged: what the charge covers and was not sent yet goes out now. */
  complete(reply: Produced): void
}

/** What one offer produced: everything for a delivered reply, or what was delivered before a failure. */
export interface Produced {
  offer: Offer
  content: string
  /** The content's token log probabilities, when the upstream sent them. */
  logprobs?: unknown[]
  toolCalls: ToolCall[]
  finish: FinishReason
  upstreamUsage?: { promptTokens: number; completionTokens: number }
  /** The max_tokens the offer was sent: the most its reply is billed for. */
  maxTokens: number
}

export interface Attempt {
  offer: Offer
  failure: Failure
}

export type TargetOutcome =
  | { kind: 'delivered'; reply: Produced }
  /** Nothing reached the client: the caller may try another model. */
  | { kind: 'failed'; attempts: Attempt[] }
  /** Failed after content reached the client (stream only). */
  | { kind: 'broken'; code: 'stream_interrupted' | 'provider_output_invalid'; detail: string; reply: Produced }
  /** The client went away; `reply` holds what was delivered, if anything was. */
  | { kind: 'client_closed'; reply?: Produced }

/** An upstream request with its reply bound: what one target of a plan is sent. */
export type BoundRequest = UpstreamRequest & { maxTokens: number }

export interface AttemptContext {
  /** The client's going away. */
  cancel: Cancel
  health: Health
  /** Told whether each attempt reached its provider. */
  reachability?: Reachability
  /** Present for streaming requests. */
  sink?: StreamSink
  now: () => number
  /**
   * Counts the attempts and the kinds of their failures, for the request's access line and metrics; `firstEventAt`:
   * when the latest attempt's first event came (by `now`).
   */
  trace?: { attempts: number; failures: string[]; firstEventAt?: number }
}

/**
 * Statuses of an upstream refusing the request itself: they say nothing about its health, and counting them would let
 * one client's odd requests open the breakers of every offer for everyone (the attempt still fails over).
 */
export const REQUEST_REFUSED = new Set([400, 413, 422])

/**
 * Tries the offers in order with the same request; fails over while nothing reached the client (docs/architecture.md
 * §5, §6).
 */
export async function tryOffers(
  offers: readonly Offer[],
  request: BoundRequest,
  rules: ToolRules,
  ctx: AttemptContext,
): Promise<TargetOutcome> {
  const attempts: Attempt[] = []
  for (const offer of offers) {
    if (ctx.cancel.aborted) return { kind: 'client_closed' }
    if (!ctx.health.acquire(offer.key, offer.maxConcurrency)) continue
    const outcome = await attempt(offer, request, rules, ctx)
    if (ctx.trace) ctx.trace.attempts++
    if (outcome.kind === 'failed') {
      for (const a of outcome.attempts) ctx.trace?.failures.push(a.failure.kind)
      attempts.push(...outcome.attempts)
      continue
    }
    // A stream the upstream broke after content went out failed as surely as one that failed over.
    if (outcome.kind === 'broken')
      ctx.trace?.failures.push(outcome.code === 'stream_interrupted' ? 'interrupted' : 'invalid_output')
    return outcome
  }
  return { kind: 'failed', attempts }
}

/** One attempt at one offer; the caller has acquired its health slot, which this releases. */
async function attempt(
  offer: Offer,
  request: BoundRequest,
  rules: ToolRules,
  ctx: AttemptContext,
): Promise<TargetOutcome> {
  const started = ctx.now()
  if (ctx.trace) ctx.trace.firstEventAt = undefined
  let firstEventMs: number | undefined
  let content = ''
  let logprobs: unknown[] | undefined
  let finish: FinishReason | undefined
  let upstreamUsage: Produced['upstreamUsage']
  const tools = new ToolCallAssembler()
  const sink = ctx.sink
  // A stream is read as it comes, so an upstream ignoring its max_tokens would be too: it is cut there. A plain reply
  // is bounded as a whole (the adapter's reply limit), and billed at most at the bound like any other.
  const bound = sink && new OutputBound(request.maxTokens)
  const produced = (): Produced => ({
    offer,
    content,
    ...(logprobs ? { logprobs } : {}),
    toolCalls: tools.result(),
    finish: finish ?? 'stop',
    upstreamUsage,
    maxTokens: request.maxTokens,
  })
  let health: 'success' | 'failure' | 'neutral' = 'failure'
  /** The upstream's output cannot be used: the next offer is tried while nothing reached the client. */
  const invalid = (detail: string): TargetOutcome => {
    if (sink?.committed) return { kind: 'broken', code: 'provider_output_invalid', detail, reply: produced() }
    return { kind: 'failed', attempts: [{ offer, failure: { kind: 'invalid_output', detail } }] }
  }
  try {
    reading: for await (const events of offer.upstream.stream(offer.upstreamModel, request, ctx.cancel)) {
      if (firstEventMs === undefined) {
        firstEventMs = ctx.now() - started
        if (ctx.trace) ctx.trace.firstEventAt = started + firstEventMs
        noteReach(ctx.reachability, offer.provider, events[0])
      }
      for (const ev of events) {
        switch (ev.type) {
          case 'content':
            content += ev.text
            // A stream's go out with its chunks; a plain reply's come in one event.
            if (ev.logprobs && !sink) logprobs = (logprobs ?? []).concat(ev.logprobs)
            sink?.content(offer, ev.text, ev.logprobs)
            if (bound?.passed(content, ev.text)) {
              // Leaving the loop closes the upstream's stream.
              finish = 'length'
              break reading
            }
            break
          case 'tool_delta': {
            const unusable = tools.add(ev.index, ev.id, ev.name, ev.arguments)
            if (unusable) return invalid(unusable)
            if (bound?.argumentsPassed(ev.arguments))
              return invalid(`tool call arguments longer than max_tokens (${request.maxTokens}) allows`)
            break
          }
          case 'finish':
            finish = ev.reason
            break
          case 'usage':
            upstreamUsage = { promptTokens: ev.promptTokens, completionTokens: ev.completionTokens }
            break
          case 'failure': {
            if (ev.failure.kind === 'aborted') {
              health = 'neutral'
              return { kind: 'client_closed', reply: sink?.committed ? produced() : undefined }
            }
            if (sink?.committed)
              return { kind: 'broken', code: 'stream_interrupted', detail: ev.failure.detail, reply: produced() }
            if (ev.failure.status !== undefined && REQUEST_REFUSED.has(ev.failure.status)) health = 'neutral'
            return { kind: 'failed', attempts: [{ offer, failure: ev.failure }] }
          }
        }
      }
      // A client that reads slowly (or not at all) holds the upstream back, not the gateway's memory: the upstream's
      // next events wait in its socket until the client has taken these, and a client that leaves pays for what it
      // was sent, not for all the upstream could send meanwhile.
      if (sink?.backlogged) await sink.drained(ctx.cancel)
    }
    if (ctx.cancel.aborted) {
      health = 'neutral'
      return { kind: 'client_closed', reply: sink?.committed ? produced() : undefined }
    }
    const reply = produced()
    const why = invalidToolCall(reply.toolCalls, rules)
    if (why) return invalid(why)
    if (reply.toolCalls.length) reply.finish = 'tool_calls'
    health = 'success'
    return { kind: 'delivered', reply }
  } finally {
    ctx.health.release(offer.key, health, firstEventMs, throughputOf(upstreamUsage, ctx.now() - started, firstEventMs))
  }
}

/** Output tokens a second after the first event, from the usage the upstream reported; undefined without one. */
function throughputOf(
  usage: Produced['upstreamUsage'],
  tookMs: number,
  firstEventMs: number | undefined,
): number | undefined {
  if (!usage?.completionTokens || firstEventMs === undefined) return undefined
  return (usage.completionTokens * 1000) / Math.max(1, tookMs - firstEventMs)
}

/** What an attempt's first events say of its provider: reached, unless no connection could be made. */
function noteReach(reachability: Reachability | undefined, provider: string, first: UpstreamEvent | undefined): void {
  if (!reachability || first === undefined) return
  if (first.type !== 'failure') return reachability.reached(provider)
  if (first.failure.unreached) reachability.unreachable(provider, first.failure.detail)
  else if (first.failure.kind !== 'aborted') reachability.reached(provider)
}
