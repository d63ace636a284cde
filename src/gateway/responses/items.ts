import { clipped, unsupported, type ApiError } from '../../protocol/errors.js'
import type { InputItem, SentItem } from '../../protocol/responses.js'

const MESSAGE_ROLES = new Set(['user', 'assistant', 'system', 'developer'])
const TEXT_PARTS = new Set(['input_text', 'output_text'])

type Raw = Record<string, unknown>

/** Text parts joined as chat completions join them; the refusal of any other part. */
function textOf(content: unknown, param: string): string | ApiError {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return unsupported(param, `${param} must be a string or a list of text parts.`)
  const parts: string[] = []
  for (const [j, part] of content.entries()) {
    const p = part as Raw | null
    const type = typeof p?.type === 'string' ? p.type : typeof p
    if (!TEXT_PARTS.has(type) || typeof p?.text !== 'string') {
      return unsupported(
        `${param}[${j}]`,
        `${param}[${j}] is a ${JSON.stringify(clipped(type))} part; only input_text and output_text parts are supported.`,
      )
    }
    parts.push(p.text)
  }
  return parts.join('\n')
}

function stringField(item: Raw, field: string, path: string): string | ApiError {
  const v = item[field]
  return typeof v === 'string' && v !== '' ? v : unsupported(`${path}.${field}`, `${path}.${field} must be a string.`)
}

/**
 * Reads one input item at `path` (`input[3]`): checked, its text parts joined; anything else refused, naming it. A
 * reasoning item (a client sending a response's output back whole) is null: dropped, as `inputOf` drops it.
 */
export function readItem(item: Raw, path: string): SentItem | ApiError | null {
  const type = item.type ?? 'message'
  switch (type) {
    case 'message': {
      const role = item.role
      if (typeof role !== 'string' || !MESSAGE_ROLES.has(role))
        return unsupported(`${path}.role`, `${path}.role must be one of user, assistant, system, developer.`)
      const content = textOf(item.content, `${path}.content`)
      if (typeof content !== 'string') return content
      return { type: 'message', role: role as 'user', content }
    }
    case 'function_call': {
      const call_id = stringField(item, 'call_id', path)
      if (typeof call_id !== 'string') return call_id
      const name = stringField(item, 'name', path)
      if (typeof name !== 'string') return name
      if (typeof item.arguments !== 'string')
        return unsupported(`${path}.arguments`, `${path}.arguments must be a string.`)
      return { type: 'function_call', call_id, name, arguments: item.arguments }
    }
    case 'function_call_output': {
      const call_id = stringField(item, 'call_id', path)
      if (typeof call_id !== 'string') return call_id
      const output = textOf(item.output, `${path}.output`)
      if (typeof output !== 'string') return output
      return { type: 'function_call_output', call_id, output }
    }
    case 'reasoning':
      return null
    case 'item_reference': {
      const id = stringField(item, 'id', path)
      return typeof id === 'string' ? { type: 'item_reference', id } : id
    }
    default:
      return unsupported(
        `${path}.type`,
        `${path} is a ${JSON.stringify(clipped(String(type)))} item; supported are message, function_call, ` +
          'function_call_output, reasoning and item_reference.',
      )
  }
}

/** Chat messages of a conversation, and for each the request field it came from (to name it in a refusal). */
export interface ChatConversation {
  messages: Raw[]
  origins: string[]
}

/**
 * The chat messages of a conversation: a function call joins the assistant message just before it (its text or other
 * calls), as chat completions carry calls; an output becomes a tool message.
 */
export function chatMessages(items: readonly { item: InputItem; origin: string }[]): ChatConversation {
  const messages: Raw[] = []
  const origins: string[] = []
  let open: { tool_calls: unknown[] } | undefined
  for (const { item, origin } of items) {
    if (item.type === 'function_call') {
      const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } }
      if (open) open.tool_calls.push(call)
      else {
        open = { tool_calls: [call] }
        messages.push(Object.assign({ role: 'assistant', content: null }, open))
        origins.push(origin)
      }
      continue
    }
    if (item.type === 'message') {
      const message: Raw = { role: item.role, content: item.content }
      messages.push(message)
      open = item.role === 'assistant' ? (message as { tool_calls: unknown[] }) : undefined
      if (open) open.tool_calls = []
    } else {
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: item.output })
      open = undefined
    }
    origins.push(origin)
  }
  // An assistant message that no call joined carries none.
  for (const m of messages) if (Array.isArray(m.tool_calls) && m.tool_calls.length === 0) delete m.tool_calls
  return { messages, origins }
}
