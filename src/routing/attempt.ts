import type { FinishReason, ToolCall } from '../protocol/chat.js'
import type { Failure, UpstreamEvent, UpstreamRequest } from '../providers/types.js'
import type { Cancel } from '../providers/cancel.js'
import { OutputBound } from '../metering/output-bound.js'
import { ToolCallAssembler, invalidToolCall, type ToolRules } from '../tools/assemble.js'
import type { Offer } from './catalog.js'
import type { Health } from './health.js'
import type { Reachability } from './reachability.js'

/** What one offer produced: everything for a delivered reply, or what was delivered before a failure. */
export interface Produced {
  offer: Offer
  content: string
  /** The model's reasoning, handed on as it came as content is ('' when it gave none). */
  reasoning: string
  /** Its reasoning began after its content had: the order its items take in the Responses API. */
  reasoningAfterContent?: true
  /** The content's token log probabilities, when the upstream sent them (a plain reply's: a stream's went out). */
  logprobs?: unknown[]
  toolCalls: ToolCall[]
  finish: FinishReason
  upstreamUsage?: { promptTokens: number; completionTokens: number }
  /** The max_tokens the offer was sent: the most its reply is billed for. */
  maxTokens: number
}

/** Content to send on, as one upstream read brought it. */
export interface ContentEvent {
  type: 'content'
  text: string
  logprobs?: readonly unknown[]
}

/** Reasoning to send on, as one upstream read brought it. */
export interface ReasoningEvent {
  type: 'reasoning'
  text: string
}

/** What an attempt hands on as it comes: the reply's text, and the reasoning before (or between) it. */
export type PassedEvent = ContentEvent | ReasoningEvent

export interface AttemptFailure {
  offer: Offer
  failure: Failure
}

/** How an attempt at an offer ended. */
export type AttemptEnd =
  | { kind: 'delivered'; reply: Produced }
  /** Nothing reached the client: the next offer may be tried. */
  | { kind: 'failed'; attempts: AttemptFailure[] }
  /** Failed after content was handed on (a stream only): the reply is broken. */
  | { kind: 'broken'; code: 'stream_interrupted' | 'provider_output_invalid'; detail: string; reply: Produced }
  /** The client went away; `reply` holds what was handed on, if anything was. */
  | { kind: 'client_closed'; reply?: Produced }

/** An upstream request with its reply bound: what one target of a plan is sent. */
export type BoundRequest = UpstreamRequest & { maxTokens: number }

export interface AttemptContext {
  /** The client's going away, or the gateway stopping. */
  cancel: Cancel
  health: Health
  /** Told whether each attempt reached its provider. */
  reachability?: Reachability
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
 * One attempt at one offer (its health slot acquired), read as its consumer pulls: `read` hands on the content of
 * each upstream read (a stream's; a plain reply's comes whole at its end), or how the attempt ended. Once content was
 * handed on, the reply is the client's: a failure then breaks it instead of failing over (docs/architecture.md §5,
 * §6). A consumer that stops reading calls `abandon`. The health slot is released when the attempt ends.
 */
export class OfferAttempt {
  private readonly upstream: AsyncIterator<readonly UpstreamEvent[]>
  private readonly started: number
  private firstEventMs: number | undefined
  private content = ''
  private reasoning = ''
  private reasoningAfterContent = false
  private logprobs: unknown[] | undefined
  private finish: FinishReason | undefined
  private upstreamUsage: Produced['upstreamUsage']
  private readonly tools = new ToolCallAssembler()
  /** A stream is read as it comes, so an upstream ignoring its max_tokens would be too: it is cut there. */
  private readonly bound: OutputBound | undefined
  private health: 'success' | 'failure' | 'neutral' = 'failure'
  private ended = false
  /** A stream's content came: the reply is committed to this offer (whatever ends it then, it is the client's). */
  committed = false

  constructor(
    readonly offer: Offer,
    private readonly request: BoundRequest,
    private readonly rules: ToolRules,
    private readonly ctx: AttemptContext,
  ) {
    this.started = ctx.now()
    if (ctx.trace) ctx.trace.firstEventAt = undefined
    if (request.stream) this.bound = new OutputBound(request.maxTokens, offer.counter)
    this.upstream = offer.upstream.stream(offer.upstreamModel, request, ctx.cancel)[Symbol.asyncIterator]()
  }

  /** What the offer produced so far. */
  produced(): Produced {
    return {
      offer: this.offer,
      content: this.content,
      reasoning: this.reasoning,
      ...(this.reasoningAfterContent ? { reasoningAfterContent: true as const } : {}),
      ...(this.logprobs ? { logprobs: this.logprobs } : {}),
      toolCalls: this.tools.result(),
      finish: this.finish ?? 'stop',
      upstreamUsage: this.upstreamUsage,
      maxTokens: this.request.maxTokens,
    }
  }

  /** The content of the upstream's next read that brought any (a stream's), or how the attempt ended. */
  async read(): Promise<PassedEvent[] | AttemptEnd> {
    try {
      for (;;) {
        if (this.then) return this.end(this.then === 'cut' ? this.completed() : this.then)
        const next = await this.upstream.next()
        if (next.done) return this.end(this.completed())
        const out = this.events(next.value)
        if (!Array.isArray(out)) return this.end(out)
        if (out.length > 0) return out
      }
    } catch (err) {
      this.end(undefined)
      throw err
    }
  }

  /** The consumer stops reading: the upstream's request is closed, the attempt ends neutral. */
  async abandon(): Promise<void> {
    if (this.ended) return
    this.health = 'neutral'
    this.end(undefined)
    await this.upstream.return?.()
  }

  /**
   * One upstream read's events: the content among them to hand on, or how the attempt ended. Content commits the
   * reply at once; an end that follows content in the same read is kept for the next `read` (`then`), so that the
   * content goes on first.
   */
  private events(batch: readonly UpstreamEvent[]): PassedEvent[] | AttemptEnd {
    if (this.firstEventMs === undefined) {
      this.firstEventMs = this.ctx.now() - this.started
      if (this.ctx.trace) this.ctx.trace.firstEventAt = this.started + this.firstEventMs
      noteReach(this.ctx.reachability, this.offer.provider, batch[0])
    }
    const out: PassedEvent[] = []
    for (const ev of batch) {
      switch (ev.type) {
        case 'reasoning':
        case 'content':
          if (ev.type === 'content') this.content += ev.text
          else {
            if (this.reasoning === '' && this.content !== '') this.reasoningAfterContent = true
            this.reasoning += ev.text
          }
          // A stream's content goes on as it comes (`bound` is a stream's); a plain reply's comes whole at its end.
          if (this.bound) {
            this.committed = true
            out.push(ev)
            // The bound is on all the reply's output tokens, its reasoning's too.
            const said = this.reasoning === '' ? this.content : this.reasoning + this.content
            if (this.bound.passed(said, ev.text)) {
              // Cut there: this read's content goes on, and the attempt completes at the next read, its upstream's
              // request closed without reading further.
              this.finish = 'length'
              this.then = 'cut'
              void this.upstream.return?.()
              return out
            }
          } else if (ev.type === 'content' && ev.logprobs) this.logprobs = (this.logprobs ?? []).concat(ev.logprobs)
          break
        case 'tool_delta': {
          const unusable = this.tools.add(ev.index, ev.id, ev.name, ev.arguments)
          if (unusable) return this.after(out, this.invalid(unusable))
          if (this.bound?.argumentsPassed(ev.arguments))
            return this.after(
              out,
              this.invalid(`tool call arguments longer than max_tokens (${this.request.maxTokens}) allows`),
            )
          break
        }
        case 'finish':
          this.finish = ev.reason
          break
        case 'usage':
          this.upstreamUsage = { promptTokens: ev.promptTokens, completionTokens: ev.completionTokens }
          break
        case 'failure':
          return this.after(out, this.failed(ev.failure))
      }
    }
    return out
  }

  /** `end`, once this read's content `out` (if any) has gone on. */
  private after(out: PassedEvent[], end: AttemptEnd): PassedEvent[] | AttemptEnd {
    if (out.length === 0) return end
    this.then = end
    return out
  }

  /** How the attempt ends at its next read: cut at its bound, or an end that came after content in one read. */
  private then: AttemptEnd | 'cut' | undefined

  private failed(failure: Failure): AttemptEnd {
    if (failure.kind === 'aborted') {
      this.health = 'neutral'
      return { kind: 'client_closed', ...(this.committed ? { reply: this.produced() } : {}) }
    }
    if (this.committed)
      return { kind: 'broken', code: 'stream_interrupted', detail: failure.detail, reply: this.produced() }
    if (failure.status !== undefined && REQUEST_REFUSED.has(failure.status)) this.health = 'neutral'
    return { kind: 'failed', attempts: [{ offer: this.offer, failure }] }
  }

  /** The upstream's output cannot be used: the next offer is tried while nothing reached the client. */
  private invalid(detail: string): AttemptEnd {
    this.ctx.health.checks.refused(this.offer.key)
    if (this.committed) return { kind: 'broken', code: 'provider_output_invalid', detail, reply: this.produced() }
    return { kind: 'failed', attempts: [{ offer: this.offer, failure: { kind: 'invalid_output', detail } }] }
  }

  /** The upstream finished (or was cut at the bound): the reply, unless its tool calls are unusable. */
  private completed(): AttemptEnd {
    if (this.ctx.cancel.aborted) {
      this.health = 'neutral'
      return { kind: 'client_closed', ...(this.committed ? { reply: this.produced() } : {}) }
    }
    const reply = this.produced()
    const why = invalidToolCall(reply.toolCalls, this.rules)
    if (why) return this.invalid(why)
    if (reply.toolCalls.length) reply.finish = 'tool_calls'
    this.health = 'success'
    return { kind: 'delivered', reply }
  }

  private end(how: AttemptEnd | undefined): AttemptEnd {
    if (!this.ended) {
      this.ended = true
      const tookMs = this.ctx.now() - this.started
      const tps = throughputOf(this.upstreamUsage, tookMs, this.firstEventMs)
      this.ctx.health.release(this.offer.key, this.health, this.firstEventMs, tps)
    }
    return how!
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
