import type { Delivered } from '../gateway/charge.js'
import type { Admitted } from '../gateway/context.js'
import type { Produced } from '../routing/attempt.js'
import { errorBody, type ApiError } from '../protocol/errors.js'
import { ANTHROPIC_ERROR_TYPE, stopReasonOf } from '../protocol/anthropic.js'
import { svcOf } from './reply-svc.js'

/** A message's id, from its request's (`req_<ULID>` → `msg_<ULID>`). */
export const messageId = (requestId: string) => `msg_${requestId.replace(/^req_/, '')}`

/** A content block of a reply: its thinking, its text, each tool call with its input parsed. */
export type ContentBlock =
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: unknown }

/** The reply's content blocks in Anthropic's order: thinking, text, then tool calls. */
export function contentBlocks(p: Produced): ContentBlock[] {
  const blocks: ContentBlock[] = []
  if (p.reasoning !== '') blocks.push({ type: 'thinking', thinking: p.reasoning, signature: '' })
  if (p.content !== '' || p.toolCalls.length === 0) blocks.push({ type: 'text', text: p.content })
  for (const c of p.toolCalls)
    blocks.push({ type: 'tool_use', id: c.id, name: c.function.name, input: JSON.parse(c.function.arguments) })
  return blocks
}

/** A delivered plain reply as Anthropic's Message, with `svc` beside its fields. */
export function anthropicMessage(r: Admitted, f: Delivered): Record<string, unknown> {
  return {
    id: messageId(r.requestId),
    type: 'message',
    role: 'assistant',
    model: r.prepared.model,
    content: contentBlocks(f.reply),
    stop_reason: stopReasonOf(f.reply.finish),
    stop_sequence: null,
    usage: { input_tokens: f.usage.prompt_tokens, output_tokens: f.usage.completion_tokens },
    svc: svcOf(r, f),
  }
}

/**
 * An error in Anthropic's shape (`{type: "error", error: {type, message}}`), our code and param beside its fields; the
 * status stays ours (docs/interface.md §4.4).
 */
export function anthropicError(err: ApiError, requestId: string): Record<string, unknown> {
  const { error } = errorBody(err)
  return {
    type: 'error',
    error: { type: ANTHROPIC_ERROR_TYPE[err.code], message: error.message, code: error.code, param: error.param },
    request_id: requestId,
  }
}
