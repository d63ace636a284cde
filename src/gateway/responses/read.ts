import { TypeCompiler } from '@sinclair/typebox/compiler'
import { apiError, isApiError, type ApiError } from '../../protocol/errors.js'
import { ResponsesRequest, type InputItem, type ResponseEcho } from '../../protocol/responses.js'
import { schemaRefusal } from '../validate.js'
import type { SentItem } from '../../protocol/responses.js'
import { chatMessages, readItem } from './items.js'
import type { ResponseMemory } from './memory.js'
import { chatFields, chatFormat, chatToolChoice, chatTools, echoOf } from './request.js'

const checker = TypeCompiler.Compile(ResponsesRequest)

/** A Responses request read: the chat request it is served as, and what its reply and its keeping need. */
export interface ReadResponses {
  chat: Record<string, unknown>
  echo: ResponseEcho
  /** The conversation's input items (without instructions), references resolved: kept with the response's output. */
  conversation: InputItem[]
  /** For each chat message, the request field it came from. */
  origins: string[]
  store: boolean
}

/**
 * Reads a POST /v1/responses body as the chat request it is served as (docs/interface.md, the Responses API): the same
 * validation, metering and routing then follow. References are resolved from what is kept for the caller's key.
 */
export async function readResponses(
  body: unknown,
  memory: ResponseMemory,
  keyId: string,
): Promise<ReadResponses | ApiError> {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return apiError('feature_not_supported', 'The request body must be a JSON object.', { param: null })
  if (!checker.Check(body)) {
    const found = checker.Errors(body).First()
    return found ? schemaRefusal(found) : apiError('feature_not_supported', 'The request body is not valid.')
  }
  const r = body
  const sent: { item: SentItem; origin: string }[] = []
  if (typeof r.input === 'string')
    sent.push({ item: { type: 'message', role: 'user', content: r.input }, origin: 'input' })
  else
    for (const [i, raw] of r.input.entries()) {
      const item = readItem(raw, `input[${i}]`)
      if (item === null) continue
      if (isApiError(item)) return item
      sent.push({ item, origin: `input[${i}]` })
    }
  const chat = chatFields(r)
  if (r.tools?.length) {
    const tools = chatTools(r.tools)
    if (isApiError(tools)) return tools
    chat.tools = tools
  }
  if (r.tool_choice != null) {
    const choice = chatToolChoice(r.tool_choice)
    if (isApiError(choice)) return choice
    chat.tool_choice = choice
  }
  if (r.text?.format) {
    const format = chatFormat(r.text.format)
    if (isApiError(format)) return format
    chat.response_format = format
  }
  const placed = await memory.resolve(keyId, r.previous_response_id ?? undefined, sent)
  if (isApiError(placed)) return placed
  const instructions = r.instructions
    ? [{ item: { type: 'message', role: 'system', content: r.instructions } as const, origin: 'instructions' }]
    : []
  const { messages, origins } = chatMessages([...instructions, ...placed])
  chat.messages = messages
  return { chat, echo: echoOf(r), conversation: placed.map((p) => p.item), origins, store: r.store !== false }
}
