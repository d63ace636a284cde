import { TypeCompiler } from '@sinclair/typebox/compiler'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
import { Value } from '@sinclair/typebox/value'
import type { TSchema } from '@sinclair/typebox'
import { ChatRequest, LOGIT_BIAS_KEY, MAX_LOGIT_BIAS, Message } from '../protocol/chat.js'
import { apiError, clipped, type ApiError } from '../protocol/errors.js'
import { jsonPointerToPath } from '../protocol/json-pointer.js'

const checker = TypeCompiler.Compile(ChatRequest)
const messageChecker = TypeCompiler.Compile(Message)

/**
 * The first of the schema's errors in the body. A long history is first searched for its first wrong message by the
 * compiled check, and the errors read with that message alone in its history (or its first, when none is wrong), the
 * message's index put back in the path (docs/architecture.md §15.7).
 */
function firstError(body: object): ValueError | undefined {
  const messages = (body as { messages?: unknown }).messages
  if (!Array.isArray(messages) || messages.length <= 64) return checker.Errors(body).First()
  const wrong = messages.findIndex((m) => !messageChecker.Check(m))
  const found = checker.Errors({ ...body, messages: [messages[Math.max(wrong, 0)]] }).First()
  if (!found || wrong <= 0 || !found.path.startsWith('/messages/0')) return found
  return { ...found, path: `/messages/${wrong}${found.path.slice('/messages/0'.length)}` }
}

function literalsOf(e: ValueError): string[] | null {
  const options = (e.schema as { anyOf?: { const?: unknown }[] }).anyOf
  if (!options?.every((o) => typeof o.const === 'string')) return null
  return options.map((o) => o.const as string)
}

function describe(e: ValueError, param: string): string {
  if (e.type === ValueErrorType.ObjectRequiredProperty) return `Missing required field ${param}.`
  const literals = literalsOf(e)
  if (literals) return `Invalid value for ${param}: expected one of ${literals.join(', ')}.`
  if (e.type === ValueErrorType.Union) return `Invalid value for ${param}: it matches none of the accepted shapes.`
  return `Invalid value for ${param}: ${e.message.charAt(0).toLowerCase()}${e.message.slice(1)}.`
}

/** Deeper than any real JSON Schema; serializing a hostile document of 50 000 levels overflowed the stack. */
const MAX_DEPTH = 64

/**
 * Values (every item and every key's value, at any level) that a request's tools and response format may hold in all:
 * far more than real ones do (a schema holds tens to a few thousand). Walked whole, 4 MiB of tool parameters held the
 * event loop for two seconds; bounded by request, not by document, as 4 MiB split into many tools is as long to walk.
 */
const MAX_VALUES = 200_000

/** OpenAI's limit on metadata: 16 key-value pairs. */
const MAX_METADATA_PAIRS = 16

type Excess = 'depth' | 'size'

/**
 * Whether a JSON value nests arrays and objects deeper than `max` or holds more values than `budget` has left (taken
 * from it), leaving out `skip` (a document checked on its own). Iterative, so depth cannot overflow the stack; a
 * container's values are counted before any is read, so a wide one is refused at once; only containers wait to be read.
 */
function excessOf(value: unknown, max: number, budget: { values: number }, skip?: unknown): Excess | null {
  if (typeof value !== 'object' || value === null) return null
  const stack: object[] = [value]
  const depths: number[] = [1]
  const keep = (child: unknown, depth: number) => {
    if (typeof child !== 'object' || child === null || child === skip) return
    stack.push(child)
    depths.push(depth)
  }
  if (--budget.values < 0) return 'size'
  while (stack.length) {
    const v = stack.pop()!
    const depth = depths.pop()!
    if (depth > max) return 'depth'
    if (Array.isArray(v)) {
      if ((budget.values -= v.length) < 0) return 'size'
      for (const child of v) keep(child, depth + 1)
    } else {
      // Not Object.values: on an object of many keys (dictionary mode) it is much slower than its keys.
      const keys = Object.keys(v)
      if ((budget.values -= keys.length) < 0) return 'size'
      for (const k of keys) keep((v as Record<string, unknown>)[k], depth + 1)
    }
  }
  return null
}

/**
 * The free-form documents a request forwards or counts as JSON (tool parameters, a response schema) within MAX_DEPTH,
 * and whatever else stands in a tool or a response format no deeper (the document sits two levels down in each); all
 * of it within MAX_VALUES. Each value is read once: a document on its own, then the rest around it.
 */
function shapeViolation(req: ChatRequest): ApiError | null {
  const refuse = (param: string, excess: Excess, max = MAX_DEPTH) => {
    const why =
      excess === 'depth'
        ? `nested deeper than ${max} levels`
        : `the request's tools and response format hold more than ${MAX_VALUES} values`
    return apiError('feature_not_supported', `Invalid value for ${param}: ${why}.`, { param })
  }
  const budget = { values: MAX_VALUES }
  for (const [i, t] of (req.tools ?? []).entries()) {
    const parameters = t.function.parameters
    const inner = excessOf(parameters, MAX_DEPTH, budget)
    if (inner) return refuse(`tools[${i}].function.parameters`, inner)
    const outer = excessOf(t, MAX_DEPTH + 2, budget, parameters)
    if (outer) return refuse(`tools[${i}]`, outer, MAX_DEPTH + 2)
  }
  const format = req.response_format
  const schema = format?.type === 'json_schema' ? format.json_schema.schema : undefined
  const inner = excessOf(schema, MAX_DEPTH, budget)
  if (inner) return refuse('response_format.json_schema.schema', inner)
  const outer = excessOf(format, MAX_DEPTH + 2, budget, schema)
  if (outer) return refuse('response_format', outer, MAX_DEPTH + 2)
  return null
}

/** The body's field `key` when it is a JSON object (a record the schema will read key by key), else undefined. */
function recordOf(body: unknown, key: string): Record<string, unknown> | undefined {
  const value = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[key] : undefined
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined
}

/**
 * Checked before the schema, which reads every key of a record (slow on a metadata of hundreds of thousands).
 */
function metadataViolation(body: unknown): ApiError | null {
  const metadata = recordOf(body, 'metadata')
  if (!metadata) return null
  const pairs = Object.keys(metadata).length
  if (pairs <= MAX_METADATA_PAIRS) return null
  return apiError(
    'feature_not_supported',
    `Invalid value for metadata: at most ${MAX_METADATA_PAIRS} key-value pairs, not ${pairs}.`,
    { param: 'metadata' },
  )
}

/**
 * Entries of logit_bias past which they are checked by hand: the schema is slow over the hundreds of thousands a body
 * can hold, and slower still to explain one wrong.
 */
const BIAS_CHECKED_BY_HAND = 1024

/**
 * The body as the schema checks it: a logit_bias of more than BIAS_CHECKED_BY_HAND entries is checked here, entry by
 * entry as the schema would, and stands in the schema's check as its first wrong entry alone, or as none when all are
 * right; the schema then finds and explains the same first error as over the whole.
 */
function forSchema(body: unknown): unknown {
  const entries = recordOf(body, 'logit_bias')
  if (!entries) return body
  const keys = Object.keys(entries)
  if (keys.length <= BIAS_CHECKED_BY_HAND) return body
  const isBias = (v: unknown) => typeof v === 'number' && v >= -MAX_LOGIT_BIAS && v <= MAX_LOGIT_BIAS
  // In the schema's order: the values of the keys that are token ids first, then the keys that are not.
  const wrong =
    keys.find((k) => LOGIT_BIAS_KEY.test(k) && !isBias(entries[k])) ?? keys.find((k) => !LOGIT_BIAS_KEY.test(k))
  return { ...(body as object), logit_bias: wrong === undefined ? {} : { [wrong]: entries[wrong] } }
}

/** `tools: null` and `tool_choice: null` mean what their absence means, as null does for every other optional field. */
function withoutNullTools(body: unknown): unknown {
  if (typeof body !== 'object' || body === null) return body
  const b = body as Record<string, unknown>
  if (b.tools !== null && b.tool_choice !== null) return body
  const copy = { ...b }
  if (copy.tools === null) delete copy.tools
  if (copy.tool_choice === null) delete copy.tool_choice
  return copy
}

/**
 * Checks the request's shape against the one schema; the first problem becomes feature_not_supported naming the field.
 */
export function validateChatRequest(raw: unknown): ChatRequest | ApiError {
  const body = withoutNullTools(raw)
  const metadata = metadataViolation(body)
  if (metadata) return metadata
  const checked = forSchema(body)
  if (checker.Check(checked)) return shapeViolation(body as ChatRequest) ?? (body as ChatRequest)
  if (typeof checked !== 'object' || checked === null || Array.isArray(checked)) {
    return apiError('feature_not_supported', 'The request body must be a JSON object.', { param: null })
  }
  const found = firstError(checked)
  if (!found) return apiError('feature_not_supported', 'The request body is not a valid chat completion request.')
  return schemaRefusal(found)
}

/** A schema's error as the client is told it: feature_not_supported naming the field. */
export function schemaRefusal(found: ValueError): ApiError {
  const first = withinNullable(found)
  // The path names a client's keys (of logit_bias, metadata): a hostile one as long as the body.
  const param = clipped(jsonPointerToPath(first.path))
  return apiError('feature_not_supported', describe(first, param), { param })
}

/**
 * An optional field may be null or its type (`Nullable`): a value that is neither fails the union, whose own message
 * says nothing of the limit. The error of its type says it (`max_tokens` 0: "expected integer to be greater or equal
 * to 1"), at the path within the field.
 */
function withinNullable(e: ValueError): ValueError {
  if (e.type !== ValueErrorType.Union) return e
  const options = (e.schema as { anyOf?: TSchema[] }).anyOf ?? []
  const typed = options.filter((o) => (o as { type?: unknown }).type !== 'null')
  if (typed.length !== 1 || typed.length === options.length) return e
  const inner = Value.Errors(typed[0]!, e.value).First()
  return inner ? withinNullable({ ...inner, path: `${e.path}${inner.path}` }) : e
}
