import type { Dispatcher } from 'undici'
import type { Cancel } from './cancel.js'
import { plainExchange, ReplyTooLarge } from './plain-exchange.js'
import type { EmbedRequest, Embedded, Failure } from './types.js'

/** What an embeddings reply may weigh: 2,048 vectors of 4,096 numbers as JSON, with room to spare. */
const MAX_EMBEDDINGS_BYTES = 256 * 1024 * 1024
const MAX_ERROR_BODY = 2048

const failed = (kind: Failure['kind'], detail: string, extra: Partial<Failure> = {}): Embedded => ({
  kind: 'failed',
  failure: { kind, detail, ...extra },
})

/**
 * One `POST …/embeddings` to an OpenAI-compatible upstream, always asking for floats (the gateway encodes base64
 * itself), its reply read whole within `timeoutMs` and checked: one vector of finite numbers per input, all of one
 * length (`dimensions` when asked). Anything else is the upstream's invalid output; a refused, broken or slow exchange
 * is it being unavailable.
 */
export async function embedExchange(
  pool: Dispatcher,
  o: { path: string; headers: Record<string, string>; upstreamModel: string; timeoutMs: number },
  request: EmbedRequest,
  cancel: Cancel,
): Promise<Embedded> {
  const body = JSON.stringify({
    model: o.upstreamModel,
    input: request.inputs,
    encoding_format: 'float',
    ...(request.dimensions !== undefined ? { dimensions: request.dimensions } : {}),
  })
  let reply: { status: number; text: string }
  try {
    reply = await plainExchange(
      pool,
      { path: o.path, headers: o.headers, body, headersTimeout: o.timeoutMs, bodyTimeout: o.timeoutMs },
      cancel,
      { errorBytes: MAX_ERROR_BODY, replyBytes: MAX_EMBEDDINGS_BYTES },
    )
  } catch (err) {
    if (cancel.aborted) return failed('aborted', 'the client left')
    if (err instanceof ReplyTooLarge) return failed('invalid_output', err.message)
    const code = (err as { code?: string }).code
    return failed('unavailable', `embeddings request failed: ${(err as Error).message}`, {
      ...(code === 'ECONNREFUSED' || code === 'ENOTFOUND' ? { unreached: true } : {}),
    })
  }
  if (reply.status !== 200)
    return failed('unavailable', `upstream answered ${reply.status}: ${reply.text.slice(0, 200)}`, {
      status: reply.status,
    })
  return readEmbeddings(reply.text, request)
}

/** An embeddings reply's vectors, in input order, checked against what was asked. */
export function readEmbeddings(text: string, request: EmbedRequest): Embedded {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return failed('invalid_output', 'the embeddings reply is not JSON')
  }
  const data = (parsed as { data?: unknown } | null)?.data
  if (!Array.isArray(data) || data.length !== request.inputs.length)
    return failed(
      'invalid_output',
      `the embeddings reply does not hold one vector per input (${request.inputs.length})`,
    )
  const vectors: number[][] = new Array<number[]>(data.length)
  for (const [at, item] of data.entries()) {
    const { index, embedding } = (item ?? {}) as { index?: unknown; embedding?: unknown }
    const i = index === undefined ? at : index
    if (typeof i !== 'number' || !Number.isInteger(i) || i < 0 || i >= data.length || vectors[i])
      return failed('invalid_output', `the embeddings reply's vector ${at} has no index of its own`)
    if (!Array.isArray(embedding) || embedding.length === 0 || !embedding.every((x) => Number.isFinite(x)))
      return failed('invalid_output', `the embeddings reply's vector ${i} is not a list of numbers`)
    vectors[i] = embedding as number[]
  }
  const length = request.dimensions ?? vectors[0]!.length
  if (vectors.some((v) => v.length !== length))
    return failed('invalid_output', `the embeddings reply's vectors are not all ${length} numbers long`)
  const usage = (parsed as { usage?: { prompt_tokens?: unknown } }).usage
  const promptTokens = typeof usage?.prompt_tokens === 'number' ? usage.prompt_tokens : null
  return { kind: 'embedded', vectors, promptTokens }
}
