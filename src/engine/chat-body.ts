import type { ChatHistoryItem } from './node-llama.js'

/** A chat completions request as the engine's session takes it. */
export interface ChatBody {
  /** The conversation before the last user message. */
  messages: ChatHistoryItem[]
  /** The last user message. */
  prompt: string
  maxTokens?: number
  temperature: number
  seed?: number
  stream: boolean
  /** `stream_options.include_usage`. */
  usage: boolean
}

export class BadRequest extends Error {}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content))
    return content.map((p) => (typeof p?.text === 'string' ? (p.text as string) : '')).join('')
  return ''
}

/** The request as the session takes it; BadRequest for a body the engine cannot serve. */
export function chatBody(body: unknown): ChatBody {
  if (typeof body !== 'object' || body === null) throw new BadRequest('the body must be a JSON object')
  const b = body as Record<string, unknown>
  if (!Array.isArray(b.messages) || b.messages.length === 0) throw new BadRequest('messages must be a non-empty array')
  const history: ChatHistoryItem[] = (b.messages as { role?: unknown; content?: unknown }[]).map((m) => {
    const text = textOf(m.content)
    if (m.role === 'system' || m.role === 'developer') return { type: 'system', text }
    if (m.role === 'assistant') return { type: 'model', response: [text] }
    if (m.role === 'user' || m.role === 'tool') return { type: 'user', text }
    throw new BadRequest(`unknown message role ${JSON.stringify(m.role)}`)
  })
  const last = history.pop()!
  if (last.type !== 'user') throw new BadRequest('the last message must be the user’s')
  const max = b.max_completion_tokens ?? b.max_tokens
  if (max !== undefined && max !== null && !(Number.isInteger(max) && (max as number) > 0))
    throw new BadRequest('max_tokens must be a positive integer')
  const temperature = b.temperature ?? 1
  if (typeof temperature !== 'number' || temperature < 0 || temperature > 2)
    throw new BadRequest('temperature must be a number from 0 to 2')
  return {
    messages: history,
    prompt: last.text ?? '',
    ...(typeof max === 'number' ? { maxTokens: max } : {}),
    temperature,
    ...(Number.isInteger(b.seed) ? { seed: b.seed as number } : {}),
    stream: b.stream === true,
    usage: (b.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true,
  }
}
