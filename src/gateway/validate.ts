import { TypeCompiler } from '@sinclair/typebox/compiler'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
import { Value } from '@sinclair/typebox/value'
import type { TSchema } from '@sinclair/typebox'
import { ChatRequest } from '../protocol/chat.js'
import { apiError, type ApiError } from '../protocol/errors.js'
import { jsonPointerToPath } from '../config.js'

const checker = TypeCompiler.Compile(ChatRequest)

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

/** Whether a JSON value nests arrays and objects deeper than `max` (iterative, so depth cannot overflow the stack). */
function nestedDeeper(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]]
  while (stack.length) {
    const [v, depth] = stack.pop()!
    if (typeof v !== 'object' || v === null) continue
    if (depth > max) return true
    for (const child of Object.values(v)) stack.push([child, depth + 1])
  }
  return false
}

/**
 * The free-form documents a request forwards or counts as JSON (tool parameters, a response schema) within MAX_DEPTH,
 * and whatever else stands in a tool or a response format no deeper (the document sits two levels down in each).
 */
function depthViolation(req: ChatRequest): ApiError | null {
  const refuse = (param: string, max = MAX_DEPTH) => apiError('feature_not_supported', `Invalid value for ${param}: nested deeper than ${max} levels.`, { param })
  for (const [i, t] of (req.tools ?? []).entries()) {
    if (nestedDeeper(t.function.parameters, MAX_DEPTH)) return refuse(`tools[${i}].function.parameters`)
    if (nestedDeeper(t, MAX_DEPTH + 2)) return refuse(`tools[${i}]`, MAX_DEPTH + 2)
  }
  const format = req.response_format
  if (format?.type === 'json_schema' && nestedDeeper(format.json_schema.schema, MAX_DEPTH)) return refuse('response_format.json_schema.schema')
  if (nestedDeeper(format, MAX_DEPTH + 2)) return refuse('response_format', MAX_DEPTH + 2)
  return null
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

/** Checks the request's shape against the one schema; the first problem becomes feature_not_supported naming the field. */
export function validateChatRequest(raw: unknown): ChatRequest | ApiError {
  const body = withoutNullTools(raw)
  if (checker.Check(body)) return depthViolation(body) ?? body
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return apiError('feature_not_supported', 'The request body must be a JSON object.', { param: null })
  }
  const found = checker.Errors(body).First()
  if (!found) return apiError('feature_not_supported', 'The request body is not a valid chat completion request.')
  const first = withinNullable(found)
  const param = jsonPointerToPath(first.path)
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
