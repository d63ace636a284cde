import { TypeCompiler } from '@sinclair/typebox/compiler'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
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

/** Checks the request's shape against the one schema; the first problem becomes feature_not_supported naming the field. */
export function validateChatRequest(body: unknown): ChatRequest | ApiError {
  if (checker.Check(body)) return body
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return apiError('feature_not_supported', 'The request body must be a JSON object.', { param: null })
  }
  const first = checker.Errors(body).First()
  if (!first) return apiError('feature_not_supported', 'The request body is not a valid chat completion request.')
  const param = jsonPointerToPath(first.path)
  return apiError('feature_not_supported', describe(first, param), { param })
}
