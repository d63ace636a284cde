import { Type, type Static } from '@sinclair/typebox'

/** Wire shapes of GET /v1/models (docs/interface.md §2.1); the same schemas describe models in the config file. */
export const Capabilities = Type.Object({
  workload: Type.Union([Type.Literal('chat'), Type.Literal('embedding')]),
  tools: Type.Boolean(),
  structuredOutputs: Type.Boolean(),
  reasoning: Type.Boolean(),
  streaming: Type.Boolean(),
  maxOutputTokens: Type.Integer({ minimum: 1 }),
  /** Whether a chat model takes images (`image_url` parts). */
  vision: Type.Optional(Type.Boolean()),
  /** An embedding model's vector length. */
  dimensions: Type.Optional(Type.Integer({ minimum: 1 })),
  /** Whether an embedding model's vectors may be asked shorter (`dimensions` in a request). */
  shortenable: Type.Optional(Type.Boolean()),
})
export type Capabilities = Static<typeof Capabilities>

export const TOOL_CHOICE_MODES = ['auto', 'none', 'required', 'named'] as const
export type ToolChoiceMode = (typeof TOOL_CHOICE_MODES)[number]

export const ToolContract = Type.Object({
  tool_choice: Type.Array(Type.Union(TOOL_CHOICE_MODES.map((m) => Type.Literal(m)))),
  parallel_tool_calls: Type.Boolean(),
  strict_schemas: Type.Boolean(),
  tool_streaming: Type.Union([Type.Literal('whole-call'), Type.Literal('incremental')]),
  max_argument_bytes: Type.Integer({ minimum: 0 }),
  certified_concurrency: Type.Integer({ minimum: 0 }),
  agentic_certified: Type.Boolean(),
  metering_version: Type.Integer({ minimum: 1 }),
  certification_id: Type.String(),
})
export type ToolContract = Static<typeof ToolContract>

export interface WirePricing {
  input_price_per_mtok: string
  output_price_per_mtok: string
  basis?: 'ceiling'
}

export interface WireModel {
  id: string
  object: 'model'
  created: number
  owned_by: string
  svc: {
    cortex?: true
    candidates?: string[]
    contextLimit: number
    capabilities: Capabilities
    tool_contract?: ToolContract
    pricing?: WirePricing
  }
}

export interface WireModelList {
  object: 'list'
  data: WireModel[]
}

export const CORTEX_MODEL_ID = 'svc/cortex@1'
export const MODEL_ID_PATTERN = '^svc/[a-z0-9][a-z0-9._-]*@[A-Za-z0-9._-]+$'
