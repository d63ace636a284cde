import type { FinishReason } from '../protocol/chat.js'
import { clipped } from '../protocol/errors.js'
import type { UpstreamEvent } from './types.js'

/** Maps OpenAI-shaped upstream JSON (stream chunks and whole replies) to typed events. */

/**
 * Finish reasons that say the reply is whole, by the names engines give them: OpenAI's, `function_call` (its older
 * name for calls), TGI's `eos_token` and `stop_sequence`. Any other (vLLM's and SGLang's `abort`, vLLM's
 * `repetition`, an `error`, Ollama's `load`, one not yet invented) ends the reply as broken: a generation the engine
 * gave up is never delivered as complete.
 */
const FINISHED: ReadonlyMap<string, FinishReason> = new Map([
  ['stop', 'stop'],
  ['length', 'length'],
  ['tool_calls', 'tool_calls'],
  ['content_filter', 'content_filter'],
  ['function_call', 'tool_calls'],
  ['eos_token', 'stop'],
  ['stop_sequence', 'stop'],
])

/** A choice's `finish_reason`: none (null or absent), the reply finished, or why it broke. */
function finishEvent(value: unknown): UpstreamEvent | undefined {
  if (value === null || value === undefined) return undefined
  const reason = typeof value === 'string' ? FINISHED.get(value) : undefined
  if (reason) return { type: 'finish', reason }
  const said = typeof value === 'string' ? clipped(value, 40) : typeof value
  return {
    type: 'failure',
    failure: {
      kind: 'unavailable',
      detail: `the upstream ended the generation with finish_reason ${JSON.stringify(said)}`,
    },
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** The largest count a usage record's column holds on every store (Postgres `integer`). */
const MAX_TOKEN_COUNT = 2 ** 31 - 1

const isCount = (v: unknown): v is number =>
  Number.isInteger(v) && (v as number) >= 0 && (v as number) <= MAX_TOKEN_COUNT

/**
 * The upstream's own token counts, recorded beside ours (never billed). Counts no usage record could hold (fractions,
 * negatives, past the column's integers) are no report at all: a note about the reply must never fail its capture.
 */
function usageEvent(usage: unknown): UpstreamEvent | null {
  if (!isObject(usage)) return null
  const p = usage.prompt_tokens
  const c = usage.completion_tokens
  if (!isCount(p) || !isCount(c)) return null
  return { type: 'usage', promptTokens: p, completionTokens: c }
}

function invalid(detail: string): UpstreamEvent[] {
  return [{ type: 'failure', failure: { kind: 'invalid_output', detail } }]
}

/**
 * A choice's token log probabilities (`logprobs.content`, asked for with `logprobs: true`): passed on as the upstream
 * wrote them, entries that are objects; undefined when there are none.
 */
function logprobsOf(choice: Record<string, unknown>): unknown[] | undefined {
  const lp = choice.logprobs
  if (!isObject(lp) || !Array.isArray(lp.content) || lp.content.length === 0) return undefined
  const out: TokenLogprob[] = []
  for (const entry of lp.content) {
    const known = tokenLogprob(entry)
    if (!known) return undefined
    const top = isObject(entry) && Array.isArray(entry.top_logprobs) ? entry.top_logprobs.map(tokenLogprob) : []
    if (top.length > MAX_TOP_LOGPROBS || !top.every((t) => t !== undefined)) return undefined
    out.push({ ...known, top_logprobs: top as TokenLogprob[] })
  }
  return out
}

/** OpenAI's limit on alternatives per token (`top_logprobs` at most 20). */
const MAX_TOP_LOGPROBS = 20

interface TokenLogprob {
  token: string
  logprob: number
  bytes: number[] | null
  top_logprobs?: TokenLogprob[]
}

/**
 * One token's log probability as OpenAI writes it, of its known fields only: passed to the client as the gateway's
 * own JSON, whatever else (or however deep) an upstream put beside them. Undefined for an entry of another shape.
 */
function tokenLogprob(entry: unknown): TokenLogprob | undefined {
  if (!isObject(entry) || typeof entry.token !== 'string' || typeof entry.logprob !== 'number') return undefined
  const bytes = entry.bytes
  if (
    bytes !== undefined &&
    bytes !== null &&
    !(Array.isArray(bytes) && bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256))
  )
    return undefined
  return { token: entry.token, logprob: entry.logprob, bytes: Array.isArray(bytes) ? (bytes as number[]) : null }
}

/** A content event, with its log probabilities when it has them. */
function contentEvent(text: string, choice: Record<string, unknown>): UpstreamEvent {
  const logprobs = logprobsOf(choice)
  return logprobs ? { type: 'content', text, logprobs } : { type: 'content', text }
}

/**
 * The longest upstream message a failure repeats: room for any real one (a sentence or two), where a hostile one may
 * run to the 16 MiB of an event, to be copied into the detail that may reach the client.
 */
const MAX_MESSAGE = 256

/** A message's or delta's reasoning: `reasoning_content` (llama.cpp, SGLang) or `reasoning` (vLLM, Ollama). */
function reasoningOf(m: Record<string, unknown>): string | undefined {
  const text = typeof m.reasoning_content === 'string' ? m.reasoning_content : m.reasoning
  return typeof text === 'string' && text.length > 0 ? text : undefined
}

/**
 * TGI's error types, as the statuses its plain replies give them (its stream's errors name a status; its older ones
 * only a type). A validation error is the request's fault, as a plain 422 is.
 */
const TGI_ERROR_STATUS: Readonly<Record<string, number>> = {
  validation: 422,
  template_error: 422,
  missing_template_variable: 422,
  tool_error: 422,
  overloaded: 429,
  generation: 424,
  incomplete_generation: 500,
  incomplete_generation_stream: 500,
  stream_serialization_error: 500,
}

/** An HTTP status an upstream wrote as a number or a numeric string; undefined for anything else. */
function statusOf(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\d{3}$/.test(value) ? Number(value) : value
  return Number.isInteger(n) && (n as number) >= 400 && (n as number) <= 599 ? (n as number) : undefined
}

/**
 * An error an upstream wrote where a chunk or a reply was due, with the status it names, so that the attempt counts it
 * as a plain reply of that status would be (a 4xx says nothing of the upstream's health): OpenAI, llama.cpp and vLLM
 * write `{"error":{"message","code"}}`, SGLang `{"object":"error","message","code"}`, TGI `{"error":"…","error_type"}`.
 * Undefined when `body` is no error.
 */
export function errorEvent(body: Record<string, unknown>, where: 'in stream' | 'reply'): UpstreamEvent | undefined {
  let message: unknown
  let status: number | undefined
  const e = body.error
  if (isObject(e)) {
    message = e.message
    status = statusOf(e.code) ?? statusOf(e.http_status_code) ?? statusOf(e.status) ?? statusOf(body.http_status_code)
  } else if (typeof e === 'string') {
    message = e
    status = statusOf(body.http_status_code) ?? TGI_ERROR_STATUS[String(body.error_type)]
  } else if (body.object === 'error') {
    message = body.message
    status = statusOf(body.code)
  } else return undefined
  const detail = `upstream error${where === 'in stream' ? ' in stream' : ''}: ${clipped(typeof message === 'string' ? message : 'unknown', MAX_MESSAGE)}`
  return {
    type: 'failure',
    failure: status === undefined ? { kind: 'unavailable', detail } : { kind: 'unavailable', detail, status },
  }
}

/** Events of one parsed stream chunk; a chunk of the wrong shape is one invalid_output failure. */
export function chunkEvents(chunk: unknown, out: UpstreamEvent[]): void {
  if (!isObject(chunk)) return void out.push(...invalid('stream chunk is not a JSON object'))
  const error = errorEvent(chunk, 'in stream')
  if (error) return void out.push(error)
  const choices = chunk.choices
  if (choices !== undefined && !Array.isArray(choices)) return void out.push(...invalid('choices is not an array'))
  const choice = choices?.[0]
  if (isObject(choice)) {
    const delta = choice.delta
    if (isObject(delta)) {
      const thought = reasoningOf(delta)
      if (thought) out.push({ type: 'reasoning', text: thought })
      if (typeof delta.content === 'string' && delta.content.length > 0) out.push(contentEvent(delta.content, choice))
      const calls = delta.tool_calls
      if (Array.isArray(calls)) {
        for (const call of calls) {
          if (!isObject(call)) return void out.push(...invalid('tool_calls entry is not an object'))
          const fn = isObject(call.function) ? call.function : {}
          out.push({
            type: 'tool_delta',
            index: typeof call.index === 'number' ? call.index : undefined,
            id: typeof call.id === 'string' ? call.id : undefined,
            name: typeof fn.name === 'string' ? fn.name : undefined,
            arguments: typeof fn.arguments === 'string' ? fn.arguments : undefined,
          })
        }
      }
    }
    const finish = finishEvent(choice.finish_reason)
    if (finish) out.push(finish)
  }
  const usage = usageEvent(chunk.usage)
  if (usage) out.push(usage)
}

/** A JSON string's body: unescaped characters and valid escapes only (the unrolled loop: linear, no backtracking). */
export const JSON_STRING_BODY = String.raw`[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*`
const PLAIN = String.raw`"[^"\\\x00-\x1f]*"`

/**
 * The whole text of a content chunk in the usual key order, without whitespace (its shape: docs/architecture.md
 * §15.30), its one group the content's JSON string body. All it matches is valid JSON that `chunkEvents` reads as
 * content alone; any other text (another order, spaces, more fields) takes the parse. Unanchored, for `ChunkStream`.
 */
export const CONTENT_CHUNK_SOURCE =
  String.raw`\{"id":${PLAIN},"object":"chat\.completion\.chunk","created":(?:0|[1-9]\d*),"model":${PLAIN},(?:"service_tier":${PLAIN},)?(?:"system_fingerprint":(?:${PLAIN}|null),)?` +
  String.raw`"choices":\[\{"index":0,"delta":\{(?:"role":"assistant",)?"content":"(${JSON_STRING_BODY})"\},(?:"logprobs":null,)?"finish_reason":null\}\](?:,"usage":null)?(?:,"obfuscation":${PLAIN})?\}`
const CONTENT_CHUNK = new RegExp(`^${CONTENT_CHUNK_SOURCE}$`)

/**
 * The longest data `CONTENT_CHUNK` is tried on; longer data is parsed: past it the match on text dense with escapes
 * grows faster than the parse, a stall any upstream could cause (docs/architecture.md §15.8).
 */
export const MAX_FAST_CHUNK = 4096

/**
 * Events of one stream event's data. Most chunks of a stream carry a piece of content and nothing else: those are
 * matched whole by `CONTENT_CHUNK` (far cheaper than `JSON.parse`, which was the largest single cost of a streamed
 * request); the rest, and any longer than `MAX_FAST_CHUNK`, are parsed and read by `chunkEvents`. Whether it parsed
 * JSON (and read it).
 */
export function dataEvents(data: string, out: UpstreamEvent[]): boolean {
  const text = contentOfChunk(data)
  if (text !== undefined) {
    if (text.length > 0) out.push({ type: 'content', text })
    return false
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(data)
  } catch {
    out.push(...invalid('stream chunk is not JSON'))
    return false
  }
  chunkEvents(parsed, out)
  return true
}

/**
 * The content of a chunk matched by `CONTENT_CHUNK` (escapes decoded), or undefined for any other text or a longer one.
 */
export function contentOfChunk(data: string): string | undefined {
  if (data.length > MAX_FAST_CHUNK) return undefined
  const body = CONTENT_CHUNK.exec(data)?.[1]
  return body === undefined ? undefined : decodeContent(body)
}

/** The text of a JSON string body matched by `CONTENT_CHUNK_SOURCE`: escapes decoded. */
export function decodeContent(body: string): string {
  return body.includes('\\') ? (JSON.parse(`"${body}"`) as string) : body
}

/** Events of a whole (non-streamed) reply, in stream order. */
export function replyEvents(reply: unknown): UpstreamEvent[] {
  const error = isObject(reply) ? errorEvent(reply, 'reply') : undefined
  if (error) return [error]
  if (!isObject(reply) || !Array.isArray(reply.choices)) return invalid('reply is not a chat completion')
  const choice = reply.choices[0]
  if (!isObject(choice) || !isObject(choice.message)) return invalid('reply has no message')
  const out: UpstreamEvent[] = []
  const msg = choice.message
  const thought = reasoningOf(msg)
  if (thought) out.push({ type: 'reasoning', text: thought })
  if (typeof msg.content === 'string' && msg.content.length > 0) out.push(contentEvent(msg.content, choice))
  if (Array.isArray(msg.tool_calls)) {
    msg.tool_calls.forEach((call, index) => {
      const fn = isObject(call) && isObject(call.function) ? call.function : {}
      out.push({
        type: 'tool_delta',
        index,
        id: isObject(call) && typeof call.id === 'string' ? call.id : undefined,
        name: typeof fn.name === 'string' ? fn.name : undefined,
        arguments: typeof fn.arguments === 'string' ? fn.arguments : undefined,
      })
    })
  }
  // A whole reply without a finish reason is taken as finished; one that names a reason it broke on is not.
  const finish = finishEvent(choice.finish_reason) ?? { type: 'finish', reason: 'stop' }
  if (finish.type === 'failure') return [finish]
  out.push(finish)
  const usage = usageEvent(reply.usage)
  if (usage) out.push(usage)
  return out
}
