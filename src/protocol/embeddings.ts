import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { apiError, unsupported, type ApiError } from './errors.js'

/** Most inputs one embeddings request may carry (OpenAI's bound). */
export const MAX_EMBEDDING_INPUTS = 2048

const TokenIds = Type.Array(Type.Integer({ minimum: 0 }), { minItems: 1 })

/**
 * `POST /v1/embeddings`'s body (OpenAI's shape; unknown fields are ignored): what the route takes, and what the OpenAPI
 * document states. `readEmbeddingsRequest` takes only bodies of it.
 */
export const EmbeddingsBody = Type.Object({
  model: Type.String({ minLength: 1 }),
  input: Type.Union([
    Type.String({ minLength: 1 }),
    Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
    TokenIds,
    Type.Array(TokenIds, { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
    Type.Array(Type.Union([Type.String({ minLength: 1 }), TokenIds]), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
  ]),
  encoding_format: Type.Optional(Type.Union([Type.Literal('float'), Type.Literal('base64')])),
  dimensions: Type.Optional(Type.Integer({ minimum: 1 })),
  user: Type.Optional(Type.String()),
})

const checker = TypeCompiler.Compile(EmbeddingsBody)

/** `POST /v1/embeddings` as read: the inputs one by one, as strings or token arrays. */
export interface EmbeddingsRequest {
  model: string
  inputs: (string | number[])[]
  encoding: 'float' | 'base64'
  dimensions?: number
}

const isTokens = (v: unknown): v is number[] =>
  Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t) && (t as number) >= 0)

/** An embeddings body read in OpenAI's shape, or what is wrong with it (the field in `param`). */
export function readEmbeddingsRequest(body: unknown): EmbeddingsRequest | ApiError {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return apiError('feature_not_supported', 'The request body must be a JSON object.')
  const b = body as Record<string, unknown>
  // The schema decides; the checks below say which field is at fault, and how.
  const fits = checker.Check(body)
  if (typeof b.model !== 'string' || b.model === '') return unsupported('model', 'model must be a non-empty string.')
  const inputs = inputsOf(b.input)
  if (typeof inputs === 'string') return unsupported('input', inputs)
  const encoding = b.encoding_format ?? 'float'
  if (encoding !== 'float' && encoding !== 'base64')
    return unsupported('encoding_format', 'encoding_format must be "float" or "base64".')
  if (b.dimensions !== undefined && (!Number.isInteger(b.dimensions) || (b.dimensions as number) < 1))
    return unsupported('dimensions', 'dimensions must be a positive integer.')
  if (b.user !== undefined && typeof b.user !== 'string') return unsupported('user', 'user must be a string.')
  if (!fits) return apiError('feature_not_supported', 'The request body is not an embeddings request.')
  return {
    model: b.model,
    inputs,
    encoding,
    ...(b.dimensions !== undefined ? { dimensions: b.dimensions as number } : {}),
  }
}

function inputsOf(input: unknown): (string | number[])[] | string {
  const shape = 'input must be a string, an array of strings, an array of token ids, or an array of token-id arrays'
  if (typeof input === 'string') return input === '' ? 'input must not be empty.' : [input]
  if (!Array.isArray(input)) return `${shape}.`
  if (input.length === 0) return 'input must not be an empty array.'
  if (isTokens(input)) return [input]
  if (input.length > MAX_EMBEDDING_INPUTS) return `input holds ${input.length} items; at most ${MAX_EMBEDDING_INPUTS}.`
  for (const [i, x] of input.entries()) {
    if (typeof x === 'string') {
      if (x === '') return `input[${i}] must not be empty.`
    } else if (!isTokens(x)) return `${shape}; input[${i}] is neither a string nor token ids.`
  }
  return input as (string | number[])[]
}

/** One vector of the reply: numbers, or with `encoding_format: "base64"` their little-endian float32 bytes. */
export interface WireEmbedding {
  object: 'embedding'
  index: number
  embedding: number[] | string
}

/** The reply of `POST /v1/embeddings` (OpenAI's shape, `svc` beside it). */
export interface EmbeddingsReply {
  object: 'list'
  data: WireEmbedding[]
  model: string
  usage: { prompt_tokens: number; total_tokens: number }
  svc: { request_id: string; receipt_id: string; cost_usdc: string; provider: string }
}

/** A vector as `encoding_format: "base64"` sends it: float32, little-endian, base64. */
export function base64Vector(v: readonly number[]): string {
  const bytes = Buffer.alloc(v.length * 4)
  v.forEach((x, i) => bytes.writeFloatLE(x, i * 4))
  return bytes.toString('base64')
}
