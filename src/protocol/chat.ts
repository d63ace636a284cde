import { Type, type Static, type TSchema } from '@sinclair/typebox'

/**
 * POST /v1/chat/completions request (docs/interface.md §4.1, docs/architecture.md §3). Unknown fields are allowed by
 * the schema and ignored by the gateway, so every SDK's extras pass; the standard optional parameters are type-checked.
 */
const Nullable = <T extends TSchema>(t: T) => Type.Optional(Type.Union([t, Type.Null()]))

export const TextPart = Type.Object({ type: Type.Literal('text'), text: Type.String() })
export const ContentPart = Type.Object({ type: Type.String() }, { additionalProperties: true })

export const ToolCall = Type.Object({
  id: Type.String(),
  type: Type.Literal('function'),
  function: Type.Object({ name: Type.String(), arguments: Type.String() }),
})
export type ToolCall = Static<typeof ToolCall>

/** OpenAI's limit on the tool calls of one assistant message, in a history as in a reply. */
export const MAX_TOOL_CALLS = 128

/** logit_bias maps token ids to a bias of at most this much either way. */
export const LOGIT_BIAS_KEY = /^[0-9]{1,7}$/
export const MAX_LOGIT_BIAS = 100

export const ROLES = ['system', 'developer', 'user', 'assistant', 'tool'] as const

export const Message = Type.Object({
  role: Type.Union(ROLES.map((r) => Type.Literal(r))),
  content: Type.Optional(Type.Union([Type.String(), Type.Array(ContentPart), Type.Null()])),
  name: Type.Optional(Type.String()),
  tool_calls: Type.Optional(Type.Array(ToolCall, { maxItems: MAX_TOOL_CALLS })),
  tool_call_id: Type.Optional(Type.String()),
})
export type Message = Static<typeof Message>

export const FunctionTool = Type.Object({
  type: Type.Literal('function'),
  function: Type.Object({
    name: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$' }),
    description: Type.Optional(Type.String()),
    parameters: Type.Optional(Type.Object({}, { additionalProperties: true })),
    strict: Nullable(Type.Boolean()),
  }),
})
export type FunctionTool = Static<typeof FunctionTool>

export const NamedToolChoice = Type.Object({
  type: Type.Literal('function'),
  function: Type.Object({ name: Type.String() }),
})
export const ToolChoice = Type.Union([
  Type.Literal('auto'),
  Type.Literal('none'),
  Type.Literal('required'),
  NamedToolChoice,
])
export type ToolChoice = Static<typeof ToolChoice>

export const ResponseFormat = Type.Union([
  Type.Object({ type: Type.Literal('text') }),
  Type.Object({ type: Type.Literal('json_object') }),
  Type.Object({
    type: Type.Literal('json_schema'),
    json_schema: Type.Object({
      name: Type.String(),
      description: Type.Optional(Type.String()),
      schema: Type.Optional(Type.Object({}, { additionalProperties: true })),
      strict: Nullable(Type.Boolean()),
    }),
  }),
])

/** Most addresses a provider preference may list. */
const MAX_LISTED = 64
const Addresses = Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: MAX_LISTED }))
/** USDC per million tokens: a number or a decimal string. */
const PricePerMtok = Type.Optional(Type.Union([Type.Number({ minimum: 0 }), Type.String({ maxLength: 32 })]))

/** Per-request routing preferences among a model's providers (OpenRouter's `provider` object, in part). */
export const ProviderPreferences = Type.Object({
  order: Addresses,
  only: Addresses,
  ignore: Addresses,
  sort: Type.Optional(Type.Union([Type.Literal('price'), Type.Literal('latency'), Type.Literal('throughput')])),
  max_price: Type.Optional(Type.Object({ prompt: PricePerMtok, completion: PricePerMtok })),
  allow_fallbacks: Type.Optional(Type.Boolean()),
  require_verified: Type.Optional(Type.Boolean()),
})
export type ProviderPreferences = Static<typeof ProviderPreferences>

export const ChatRequest = Type.Object({
  model: Type.String(),
  messages: Type.Array(Message, { minItems: 1 }),
  max_tokens: Nullable(Type.Integer({ minimum: 1 })),
  max_completion_tokens: Nullable(Type.Integer({ minimum: 1 })),
  stream: Nullable(Type.Boolean()),
  stream_options: Nullable(Type.Object({ include_usage: Type.Optional(Type.Boolean()) })),
  temperature: Nullable(Type.Number({ minimum: 0, maximum: 2 })),
  top_p: Nullable(Type.Number({ minimum: 0, maximum: 1 })),
  stop: Nullable(Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 4 })])),
  // What upstreams accept (OpenAI's limits): a value past them is the client's error, not a provider's failure.
  seed: Nullable(Type.Integer({ minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER })),
  user: Nullable(Type.String()),
  n: Nullable(Type.Integer({ minimum: 1 })),
  presence_penalty: Nullable(Type.Number({ minimum: -2, maximum: 2 })),
  frequency_penalty: Nullable(Type.Number({ minimum: -2, maximum: 2 })),
  logit_bias: Nullable(
    Type.Record(
      Type.String({ pattern: LOGIT_BIAS_KEY.source }),
      Type.Number({ minimum: -MAX_LOGIT_BIAS, maximum: MAX_LOGIT_BIAS }),
      { additionalProperties: false },
    ),
  ),
  logprobs: Nullable(Type.Boolean()),
  top_logprobs: Nullable(Type.Integer({ minimum: 0, maximum: 20 })),
  metadata: Nullable(Type.Record(Type.String(), Type.String())),
  // OpenAI's limit: 128 functions a request.
  tools: Type.Optional(Type.Array(FunctionTool, { maxItems: 128 })),
  tool_choice: Type.Optional(ToolChoice),
  parallel_tool_calls: Nullable(Type.Boolean()),
  response_format: Nullable(ResponseFormat),
  provider: Nullable(ProviderPreferences),
})
export type ChatRequest = Static<typeof ChatRequest>

/** Parameters forwarded to the upstream untouched when present. */
export const FORWARDED_PARAMS = [
  'temperature',
  'top_p',
  'stop',
  'seed',
  'user',
  'presence_penalty',
  'frequency_penalty',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'metadata',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'response_format',
] as const satisfies readonly (keyof ChatRequest)[]

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter'

export interface Usage {
  prompt_tokens: number
  /** All the reply's output tokens: its reasoning's among them. */
  completion_tokens: number
  total_tokens: number
  /** Present when the reply had reasoning: how many of its completion tokens were reasoning. */
  completion_tokens_details?: { reasoning_tokens: number }
}

export interface RoutingDescription {
  model: string
  served_by: string
  vendor_fallback: boolean
  status: string
}

/** The svc object of a reply and of the stream's svc chunk. */
export interface ReplySvc {
  cost_usdc: string
  provider: string
  request_id: string
  /** The id of the request's signed receipt (GET /v1/usage/{id}). */
  receipt_id: string
  routing?: RoutingDescription
}

export interface ChatCompletion {
  id: string
  object: 'chat.completion'
  created: number
  model: string
  system_fingerprint: string
  choices: {
    index: number
    /** `reasoning_content`: the model's reasoning, present when it gave any. */
    message: { role: 'assistant'; content: string | null; reasoning_content?: string; tool_calls?: ToolCall[] }
    /** Present when the request asked for them (`logprobs: true`); null when the serving upstream sent none. */
    logprobs?: { content: unknown[]; refusal: null } | null
    finish_reason: FinishReason
  }[]
  usage: Usage
  svc: ReplySvc
}
