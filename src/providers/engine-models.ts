import { Agent, request } from 'undici'
import { guardedLookup, literalRefusal, type AddressPolicy } from './address-policy.js'

/** The longest model list read: room for thousands of names. */
const MAX_LIST_BYTES = 1024 * 1024
const MAX_NAMES = 1000

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/**
 * The model names in an engine's `GET /v1/models` reply, in each engine's shape: OpenAI's `{"data":[{"id"}]}` (vLLM,
 * SGLang, TGI, Ollama, llama.cpp's server), llama.cpp's `{"models":[{"name","model"}]}` beside it, or one model object
 * `{"id"}`. Null for a body of none of these shapes.
 */
export function modelNames(body: unknown): string[] | null {
  if (!isObject(body)) return null
  const names = (list: unknown[], keys: string[]) =>
    list.flatMap((m) => {
      const key = isObject(m) ? keys.find((k) => typeof m[k] === 'string' && m[k] !== '') : undefined
      return key ? [String((m as Record<string, unknown>)[key])] : []
    })
  if (Array.isArray(body.data)) return [...new Set(names(body.data, ['id']))].slice(0, MAX_NAMES)
  if (Array.isArray(body.models)) return [...new Set(names(body.models, ['model', 'name']))].slice(0, MAX_NAMES)
  if (typeof body.id === 'string' && body.id !== '') return [body.id]
  return null
}

/**
 * Asks an OpenAI-compatible engine which models it serves, on an address `addresses` allows: the names, or why there
 * are none to tell.
 */
export async function listModels(
  baseUrl: string,
  { apiKey, addresses, timeoutMs }: { apiKey?: string | null; addresses: AddressPolicy; timeoutMs: number },
): Promise<{ models: string[] } | { error: string }> {
  const url = new URL(`${baseUrl.replace(/\/$/, '')}/models`)
  const refused = literalRefusal(url, addresses)
  if (refused) return { error: refused }
  const dispatcher = new Agent({ connect: { lookup: guardedLookup(addresses) } })
  try {
    const res = await request(url, {
      dispatcher,
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    })
    const chunks: Buffer[] = []
    let size = 0
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      chunks.push(chunk)
      if ((size += chunk.length) > MAX_LIST_BYTES) {
        res.body.destroy()
        return { error: `its model list is larger than ${MAX_LIST_BYTES / 1024 / 1024} MiB` }
      }
    }
    const text = Buffer.concat(chunks).toString('utf8')
    if (res.statusCode !== 200) return { error: `GET ${url.pathname} answered ${res.statusCode}` }
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return { error: `GET ${url.pathname} did not answer JSON` }
    }
    const models = modelNames(body)
    return models ? { models } : { error: `GET ${url.pathname} answered no model list` }
  } catch (err) {
    const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } }
    return { error: `GET ${url.pathname} failed: ${e.code ?? e.cause?.code ?? e.message ?? String(err)}` }
  } finally {
    await dispatcher.close()
  }
}
