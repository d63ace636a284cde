// What one serving engine's OpenAI-compatible wire looks like, for the simulated upstream to speak it.
import type { ModelBehaviour } from '../behaviour.js'
import type { SimReply } from '../reply.js'
import type { Fragmentation } from '../wire.js'

export type DialectName = 'openai' | 'llamacpp' | 'vllm' | 'sglang' | 'tgi' | 'ollama'
export const DIALECT_NAMES: readonly DialectName[] = ['openai', 'llamacpp', 'vllm', 'sglang', 'tgi', 'ollama']

/** What every chunk of one streamed reply shares, and what the request asked of the stream. */
export interface StreamContext {
  model: string
  /** A completion id in the engine's own form. */
  id: string
  created: number
  /** `stream_options.include_usage` was asked (engines send usage only then; the `openai` dialect always does). */
  usage: boolean
  fragmentation: Fragmentation
}

/**
 * One SSE event of a streamed reply: `output` ones carry reasoning, content or a tool call's delta (faults count
 * them to cut a stream where output is under way); the others open or close the stream.
 */
export interface Frame {
  kind: 'head' | 'output' | 'tail'
  text: string
}

export interface Dialect {
  /** A completion id as the engine writes it. */
  completionId(): string
  /** The events of a streamed reply, in order, the end marker (if the engine writes one) included. */
  frames(reply: SimReply, c: StreamContext): Iterable<Frame>
  /**
   * What the engine writes inside its 200 stream when it fails with `status` (after `output` output events, 0 before
   * any), after which it closes the stream; undefined when the engine answers such an error before streaming, with
   * `errorReply` (only asked when `output` is 0).
   */
  streamError(status: number, message: string, c: StreamContext, output: number): string | undefined
  /** A whole (non-streamed) reply's body, as the engine writes its bytes. */
  completion(reply: SimReply, c: StreamContext): string
  /** An error reply: the status the engine gives `status`'s kind of error (TGI's validation is 422), and its body. */
  errorReply(status: number, message: string): { status: number; body: unknown }
  /** Its `GET /v1/models` reply for the models it serves. */
  modelList(names: readonly string[]): unknown
  /** The finish reason of a generation the engine gave up. */
  readonly abortReason: string
  /** What the engine imposes over any model's tool abilities (llama.cpp's server ignores a named tool_choice). */
  readonly behaviour: Partial<ModelBehaviour>
  /** The engine closes a connection this long after a streamed reply ended (llama.cpp's server); undefined: never. */
  readonly closeAfterStreamMs?: number
}

/** OpenAI's model list of `names`, each model with `extra` fields (as vLLM and SGLang add theirs). */
export function openaiModelList(names: readonly string[], ownedBy: string, extra: (id: string) => object = () => ({})) {
  return {
    object: 'list',
    data: names.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: ownedBy, ...extra(id) })),
  }
}

/** One SSE event of `data`. */
export const sse = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`
export const DONE = 'data: [DONE]\n\n'

/** JSON as Python's `json.dumps` writes it by default: a space after each `,` and `:` (vLLM's and SGLang's errors). */
export function pythonJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`
  if (typeof value === 'object' && value !== null)
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pythonJson(v)}`)
      .join(', ')}}`
  return JSON.stringify(value)
}

/** Output tokens of a reply: its reasoning words and its content pieces. */
export const outputTokens = (reply: SimReply): number => reply.reasoning.length + reply.pieces.length

/** OpenAI's usage object of a reply. */
export function usageOf(reply: SimReply) {
  const completion = outputTokens(reply) + (reply.reportedExtra ?? 0)
  return {
    prompt_tokens: reply.promptTokens,
    completion_tokens: completion,
    total_tokens: reply.promptTokens + completion,
  }
}

/** A deterministic run of `length` characters of [0-9a-zA-Z] from `seed`. */
export function alnum(seed: number, length: number): string {
  const chars = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'
  let x = seed >>> 0 || 1
  let out = ''
  for (let i = 0; i < length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out += chars[(x >>> 0) % chars.length]
  }
  return out
}

let serial = 0
/** A seed that differs between the calls of one process. */
export const nextSeed = (): number => (Date.now() ^ (++serial * 0x9e3779b1)) >>> 0
