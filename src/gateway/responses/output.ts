import type { Produced } from '../../routing/attempt.js'
import type { Usage } from '../../protocol/chat.js'
import {
  callItemId,
  messageItemId,
  reasoningItemId,
  type InputItem,
  type OutputItem,
  type ResponseStatus,
  type ResponseUsage,
} from '../../protocol/responses.js'

/** A reply cut by its bound or a filter is incomplete, and says why (as OpenAI's does). */
export function statusOf(p: Produced): { status: ResponseStatus; incomplete_details: { reason: string } | null } {
  if (p.finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } }
  if (p.finish === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } }
  return { status: 'completed', incomplete_details: null }
}

/** Each reply's items, made once: its stream's events and its kept response both need them. */
const made = new WeakMap<Produced, OutputItem[]>()

/**
 * The output items of a delivered reply: its reasoning (if any), its text as a message (unless it is calls only), then
 * each call; the reasoning after the message when it came after the text began, as a stream opened them.
 */
export function outputItems(requestId: string, p: Produced): OutputItem[] {
  let items = made.get(p)
  if (!items) made.set(p, (items = itemsOf(requestId, p)))
  return items
}

function itemsOf(requestId: string, p: Produced): OutputItem[] {
  const items: OutputItem[] = []
  const reasoning: OutputItem | undefined =
    p.reasoning === ''
      ? undefined
      : {
          id: reasoningItemId(requestId),
          type: 'reasoning',
          status: p.finish === 'length' ? 'incomplete' : 'completed',
          summary: [],
          content: [{ type: 'reasoning_text', text: p.reasoning }],
        }
  if (reasoning && !p.reasoningAfterContent) items.push(reasoning)
  if (p.content !== '' || p.toolCalls.length === 0) {
    items.push({
      id: messageItemId(requestId),
      type: 'message',
      status: p.finish === 'length' ? 'incomplete' : 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: p.content, annotations: [], logprobs: [] }],
    })
  }
  if (reasoning && p.reasoningAfterContent) items.push(reasoning)
  p.toolCalls.forEach((c, i) =>
    items.push({
      id: callItemId(requestId, i),
      type: 'function_call',
      status: 'completed',
      call_id: c.id,
      name: c.function.name,
      arguments: c.function.arguments,
    }),
  )
  return items
}

/**
 * An output item as a later request's input reads it; none for reasoning, which is not sent to a model again (as the
 * engines' chat templates drop a past turn's reasoning).
 */
export function inputOf(item: OutputItem): InputItem | null {
  if (item.type === 'reasoning') return null
  if (item.type === 'function_call')
    return { type: 'function_call', call_id: item.call_id, name: item.name, arguments: item.arguments }
  return { type: 'message', role: 'assistant', content: item.content.map((c) => c.text).join('') }
}

export function responseUsage(u: Usage): ResponseUsage {
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: u.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: u.total_tokens,
  }
}
