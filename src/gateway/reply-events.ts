import type { FinishReason, ToolCall } from '../protocol/chat.js'
import type { ApiError } from '../protocol/errors.js'
import type { Offer } from '../routing/catalog.js'
import type { PassedEvent, Produced } from '../routing/attempt.js'
import type { Admitted } from './context.js'
import type { Delivered } from './charge.js'
import type { Remember } from './idempotency.js'

/**
 * A served reply as the route pulls it, in this order (docs/interface.md §4.1): `start` (the offer it committed to),
 * content and reasoning as they came, each tool call whole, `finish` (the reply whole), then `charged` once its charge
 * is durable, or `failed` when it broke after `start`. A reply whose client left ends with no last event.
 */
export type ReplyEvent =
  | { type: 'start'; offer: Offer }
  /** Content and reasoning, as they came. */
  | PassedEvent
  | { type: 'tool_call'; index: number; call: ToolCall }
  | { type: 'finish'; reason: FinishReason; reply: Produced }
  | {
      type: 'charged'
      delivered: Delivered
      /** Under an idempotency key, a plain reply's: keeps its encoded text for a retry, before it is sent. */
      remember?: Remember
    }
  | {
      type: 'failed'
      /** What a stream says in its error chunk. */
      code: 'stream_interrupted' | 'provider_output_invalid'
      /** What a reply whose status line has not gone out is answered instead (nothing was charged). */
      error: ApiError
    }

/** A served reply's events, a batch per upstream read; `return()` when the client leaves ends it (charged so). */
export type ReplyEvents = AsyncGenerator<ReplyEvent[], void, undefined>

/** What a chat request comes to, for the route to encode. */
export type Answer =
  /** Refused, or failed before anything was served: nothing charged. */
  | { kind: 'refused'; error: ApiError }
  /** Its idempotency key's first request finished with this reply: sent again, nothing run or charged. */
  | { kind: 'replay'; status: number; body: string; firstRequestId: string }
  /** Its client left before anything was served: no one to answer. */
  | { kind: 'gone' }
  /** Served: its events, which the route pulls. */
  | { kind: 'serving'; request: Admitted; events: ReplyEvents }

/**
 * How a chat request's admission ended: its answer, or its hold taken and its answer to come once an offer committed
 * (a stream keeps its client waiting meanwhile).
 */
export type ChatResult = Answer | { kind: 'admitted'; request: Admitted; answer: Promise<Answer> }
