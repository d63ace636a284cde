import { FORWARDED_PARAMS, type ChatRequest, type Message } from '../protocol/chat.js'
import { apiError, type ApiError } from '../protocol/errors.js'
import type { MeteredMessage } from '../metering/tokens.js'

export interface NormalizedMessages {
  metered: MeteredMessage[]
  /** Messages as sent upstream: content parts joined into one string. */
  upstream: Record<string, unknown>[]
  /** Whether the history uses tool calls or tool results. */
  usesTools: boolean
}

/** Joins text parts, checks per-role rules, and prepares messages for metering and for the upstream. */
export function normalizeMessages(messages: readonly Message[]): NormalizedMessages | ApiError {
  const metered: MeteredMessage[] = []
  const upstream: Record<string, unknown>[] = []
  let usesTools = false
  for (const [i, m] of messages.entries()) {
    let text: string
    if (typeof m.content === 'string') text = m.content
    else if (Array.isArray(m.content)) {
      const parts: string[] = []
      for (const [j, part] of m.content.entries()) {
        const p = part as { type: string; text?: unknown }
        if (p.type !== 'text' || typeof p.text !== 'string') {
          return apiError('feature_not_supported', `messages[${i}].content[${j}] is a ${JSON.stringify(p.type)} part; only text parts are supported.`, { param: `messages[${i}].content` })
        }
        parts.push(p.text)
      }
      text = parts.join('\n')
    } else {
      if (!(m.role === 'assistant' && m.tool_calls?.length)) {
        return apiError('feature_not_supported', `messages[${i}].content is required for a ${m.role} message.`, { param: `messages[${i}].content` })
      }
      text = ''
    }
    if (m.role === 'tool') {
      if (!m.tool_call_id) return apiError('feature_not_supported', `messages[${i}] is a tool message without tool_call_id.`, { param: `messages[${i}].tool_call_id` })
      usesTools = true
    }
    if (m.tool_calls?.length && m.role !== 'assistant') {
      return apiError('feature_not_supported', `messages[${i}].tool_calls is only allowed on assistant messages.`, { param: `messages[${i}].tool_calls` })
    }
    const out: Record<string, unknown> = { role: m.role, content: m.content === null || m.content === undefined ? null : text }
    if (m.name !== undefined) out.name = m.name
    if (m.tool_calls?.length) {
      usesTools = true
      out.tool_calls = m.tool_calls
    }
    if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id
    upstream.push(out)
    metered.push({
      role: m.role,
      text,
      ...(m.name ? { name: m.name } : {}),
      ...(m.tool_calls?.length ? { toolCalls: m.tool_calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments })) } : {}),
    })
  }
  return { metered, upstream, usesTools }
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
    if (v !== undefined && v !== null && !(k === 'tools' && toolsJson !== undefined)) body[k] = v
  }
  const json = JSON.stringify(body)
  return toolsJson === undefined ? json : `${json.slice(0, -1)},"tools":${toolsJson}}`
}
