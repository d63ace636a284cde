import { FORWARDED_PARAMS, type ChatRequest, type Message } from '../protocol/chat.js'
import { apiError, clipped, type ApiError } from '../protocol/errors.js'
import type { MeteredMessage } from '../metering/tokens.js'
import { MAX_IMAGES, readImage } from '../metering/images.js'

export interface NormalizedMessages {
  metered: MeteredMessage[]
  /** Messages as sent upstream: content parts joined into one string. */
  upstream: Record<string, unknown>[]
  /** Whether the history uses tool calls or tool results. */
  usesTools: boolean
  /** Images among the messages' parts, and the input tokens they count for (`metering/images.ts`). */
  images: number
  imageTokens: number
}

/** Joins text parts, checks per-role rules, and prepares messages for metering and for the upstream. */
export function normalizeMessages(messages: readonly Message[]): NormalizedMessages | ApiError {
  const metered: MeteredMessage[] = []
  const upstream: Record<string, unknown>[] = []
  let usesTools = false
  let images = 0
  let imageTokens = 0
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!
    let text: string
    /** The message's parts as sent on, when it holds an image (text alone is sent joined). */
    let withImages: Record<string, unknown>[] | undefined
    if (typeof m.content === 'string') text = m.content
    else if (Array.isArray(m.content)) {
      const parts: string[] = []
      for (const [j, part] of m.content.entries()) {
        const p = part as { type: string; text?: unknown; image_url?: { url?: unknown; detail?: unknown } }
        if (p.type === 'image_url' && m.role === 'user') {
          const image = readImage(p.image_url?.url, p.image_url?.detail)
          if ('error' in image)
            return apiError('feature_not_supported', `messages[${i}].content[${j}]: ${image.error}.`, {
              param: `messages[${i}].content[${j}].image_url`,
            })
          if (++images > MAX_IMAGES)
            return apiError('feature_not_supported', `A request may carry at most ${MAX_IMAGES} images.`, {
              param: `messages[${i}].content[${j}]`,
            })
          imageTokens += image.tokens
          withImages ??= parts.map((t) => ({ type: 'text', text: t }))
          const { url, detail } = p.image_url!
          withImages.push({ type: 'image_url', image_url: { url, ...(detail !== undefined ? { detail } : {}) } })
          continue
        }
        if (p.type !== 'text' || typeof p.text !== 'string') {
          return apiError(
            'feature_not_supported',
            `messages[${i}].content[${j}] is a ${JSON.stringify(clipped(p.type))} part; only text parts (and image_url parts in user messages) are supported.`,
            { param: `messages[${i}].content` },
          )
        }
        parts.push(p.text)
        withImages?.push({ type: 'text', text: p.text })
      }
      text = parts.join('\n')
    } else {
      if (!(m.role === 'assistant' && m.tool_calls?.length)) {
        return apiError('feature_not_supported', `messages[${i}].content is required for a ${m.role} message.`, {
          param: `messages[${i}].content`,
        })
      }
      text = ''
    }
    if (m.role === 'tool') {
      if (!m.tool_call_id)
        return apiError('feature_not_supported', `messages[${i}] is a tool message without tool_call_id.`, {
          param: `messages[${i}].tool_call_id`,
        })
      usesTools = true
    }
    if (m.tool_calls?.length && m.role !== 'assistant') {
      return apiError('feature_not_supported', `messages[${i}].tool_calls is only allowed on assistant messages.`, {
        param: `messages[${i}].tool_calls`,
      })
    }
    // Rebuilt of the fields it checks and counts: whatever else a client puts in a message or a call is not sent on.
    const out: Record<string, unknown> = {
      role: m.role,
      content: m.content === null || m.content === undefined ? null : (withImages ?? text),
    }
    if (m.name !== undefined) out.name = m.name
    const calls = m.tool_calls?.length
      ? m.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }))
      : undefined
    if (calls) {
      usesTools = true
      out.tool_calls = calls.map((c) => ({
        id: c.id,
        type: 'function',
        function: { name: c.name, arguments: c.arguments },
      }))
    }
    if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id
    upstream.push(out)
    // Fields set one by one, not spread from objects made for the purpose: cheaper on a long history.
    const counted: MeteredMessage = { role: m.role, text }
    if (m.name) counted.name = m.name
    if (calls) counted.toolCalls = calls
    if (m.tool_call_id) counted.toolCallId = m.tool_call_id
    metered.push(counted)
  }
  return { metered, upstream, usesTools, images, imageTokens }
}

/**
 * The upstream body without model, stream flags and max_tokens (the adapter sets them): standard parameters forwarded,
 * unknown ones dropped. `toolsJson`, when given, is the request's tools already serialized (for metering): spliced in,
 * not serialized again.
 */
export function upstreamBodyJson(req: ChatRequest, messages: Record<string, unknown>[], toolsJson?: string): string {
  const body: Record<string, unknown> = { messages }
  for (const k of FORWARDED_PARAMS) {
    const v = req[k]
    if (v === undefined || v === null) continue
    // Without a tool an upstream refuses `tools`, and without `logprobs: true` it refuses `top_logprobs` (as OpenAI
    // does): refused there, the request would fail every offer as if none could serve it. Neither asks for anything.
    if (k === 'tools' && (toolsJson !== undefined || req.tools!.length === 0)) continue
    // Nor do they take a choice among tools, or their parallel calls, without any tool (a named or required choice was
    // refused before: it names no declared tool).
    if ((k === 'tool_choice' || k === 'parallel_tool_calls') && !req.tools?.length) continue
    if (k === 'top_logprobs' && req.logprobs !== true) continue
    body[k] = v
  }
  // Sent as the fields the gateway checked, and no others (a client's extras there would reach the model uncounted).
  if (typeof req.tool_choice === 'object' && req.tools?.length)
    body.tool_choice = { type: 'function', function: { name: req.tool_choice.function.name } }
  if (req.response_format) body.response_format = knownFormat(req.response_format)
  const json = JSON.stringify(body)
  return toolsJson === undefined ? json : `${json.slice(0, -1)},"tools":${toolsJson}}`
}

/** A response format of its known fields, as sent; a schema's (name, description, document) are counted as its JSON. */
export function knownFormat(format: NonNullable<ChatRequest['response_format']>): {
  type: string
  json_schema?: Record<string, unknown>
} {
  if (format.type !== 'json_schema') return { type: format.type }
  const { name, description, schema, strict } = format.json_schema
  return { type: 'json_schema', json_schema: { name, description, schema, strict } }
}
