import { Type, type Static, type TSchema } from '@sinclair/typebox'
import type { ReplySvc } from './chat.js'

/**
 * POST /v1/responses request (docs/interface.md, the Responses API). As for chat completions, unknown fields are
 * allowed and ignored; those the gateway reads are type-checked. Items and tools are checked loosely here (a `type`
 * string) and one by one when read, so that a refusal names the item and says what is supported.
 */
const Nullable = <T extends TSchema>(t: T) => Type.Optional(Type.Union([t, Type.Null()]))

const Item = Type.Object({ type: Type.Optional(Type.String()) }, { additionalProperties: true })
const Tool = Type.Object({ type: Type.String() }, { additionalProperties: true })

export const ResponsesRequest = Type.Object({
  model: Type.String(),
  input: Type.Union([Type.String(), Type.Array(Item)]),
  instructions: Nullable(Type.String()),
  previous_response_id: Nullable(Type.String()),
  max_output_tokens: Nullable(Type.Integer({ minimum: 1 })),
  temperature: Nullable(Type.Number({ minimum: 0, maximum: 2 })),
  top_p: Nullable(Type.Number({ minimum: 0, maximum: 1 })),
  tools: Nullable(Type.Array(Tool, { maxItems: 128 })),
  tool_choice: Nullable(
    Type.Union([Type.String(), Type.Object({ type: Type.String() }, { additionalProperties: true })]),
  ),
  parallel_tool_calls: Nullable(Type.Boolean()),
  stream: Nullable(Type.Boolean()),
  text: Nullable(Type.Object({ format: Type.Optional(Item) }, { additionalProperties: true })),
  // Checked as the chat request's metadata, which bounds its pairs before its schema reads them.
  metadata: Nullable(Type.Object({}, { additionalProperties: true })),
  store: Nullable(Type.Boolean()),
  user: Nullable(Type.String()),
})
export type ResponsesRequest = Static<typeof ResponsesRequest>

/** An input item as kept and read: a message of plain text, a function call, or a function call's output. */
export type InputItem =
  | { type: 'message'; role: 'user' | 'assistant' | 'system' | 'developer'; content: string }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | { type: 'function_call_output'; call_id: string; output: string }

export interface OutputText {
  type: 'output_text'
  text: string
  annotations: []
  logprobs: []
}

export interface MessageItem {
  id: string
  type: 'message'
  status: 'in_progress' | 'completed' | 'incomplete'
  role: 'assistant'
  content: OutputText[]
}

export interface FunctionCallItem {
  id: string
  type: 'function_call'
  status: 'in_progress' | 'completed'
  call_id: string
  name: string
  arguments: string
}

/** The model's reasoning, as open models' reasoning is given (its text whole, no summary). */
export interface ReasoningItem {
  id: string
  type: 'reasoning'
  status: 'in_progress' | 'completed' | 'incomplete'
  summary: []
  content: { type: 'reasoning_text'; text: string }[]
}

export type OutputItem = MessageItem | FunctionCallItem | ReasoningItem

export interface ResponseUsage {
  input_tokens: number
  input_tokens_details: { cached_tokens: number }
  output_tokens: number
  output_tokens_details: { reasoning_tokens: number }
  total_tokens: number
}

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed'

/** What a response echoes of its request. */
export interface ResponseEcho {
  instructions: string | null
  max_output_tokens: number | null
  parallel_tool_calls: boolean
  previous_response_id: string | null
  temperature: number | null
  top_p: number | null
  text: { format: unknown }
  tool_choice: unknown
  tools: unknown[]
  metadata: Record<string, string>
  store: boolean
}

/** The svc object of a failed stream: nothing was charged; the provider, when one had begun to answer. */
export type FailedSvc = Omit<ReplySvc, 'provider'> & { provider?: string }

export interface ResponseObject extends ResponseEcho {
  id: string
  object: 'response'
  created_at: number
  status: ResponseStatus
  error: { code: string; message: string } | null
  incomplete_details: { reason: string } | null
  model: string
  output: OutputItem[]
  usage: ResponseUsage | null
  svc?: ReplySvc | FailedSvc
}

/** The response id and output item ids that share the request's ULID. */
export const responseId = (requestId: string): string => `resp_${requestId.slice(4)}`
export const messageItemId = (requestId: string): string => `msg_${requestId.slice(4)}`
export const callItemId = (requestId: string, i: number): string => `fc_${requestId.slice(4)}_${i}`
export const reasoningItemId = (requestId: string): string => `rs_${requestId.slice(4)}`

/** An input item as the client sent it: one of `InputItem`, or a reference to a kept item. */
export type SentItem = InputItem | { type: 'item_reference'; id: string }
