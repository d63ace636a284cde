import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { apiError, isApiError, unsupported, type ApiError, type ErrorCode } from './errors.js'

/** Most stop sequences a request may carry: what upstreams take as `stop`. */
const MAX_STOP = 4

/**
 * Anthropic's Messages API (`POST /v1/messages`, docs/interface.md §4.2c) read as the chat completion request it stands
 * for: the system prompt, text, image, tool-use and tool-result blocks, `max_tokens`, `stop_sequences`, `tool_choice`,
 * `stream`. What it cannot express (documents, more stop sequences than upstreams take) is refused naming the field.
 */

type Block = { type?: unknown; [k: string]: unknown }
/** A block as read: anything that is not an object reads as one of no type. */
const asBlock = (v: unknown): Block => (typeof v === 'object' && v !== null ? (v as Block) : {})
const isText = (v: unknown) => asBlock(v).type === 'text' && typeof asBlock(v).text === 'string'
type ChatMessage = Record<string, unknown>

const AnyBlock = Type.Object({ type: Type.String() }, { additionalProperties: true })

/**
 * `POST /v1/messages`'s body as the route takes it and the OpenAPI document states it (unknown fields ignored); blocks
 * are checked one by one as they are read, so that a refusal names the block.
 */
export const MessagesBody = Type.Object({
  model: Type.String({ minLength: 1 }),
  max_tokens: Type.Integer({ minimum: 1 }),
  messages: Type.Array(
    Type.Object({
      role: Type.Union([Type.Literal('user'), Type.Literal('assistant')]),
      content: Type.Union([Type.String(), Type.Array(AnyBlock)]),
    }),
    { minItems: 1 },
  ),
  system: Type.Optional(Type.Union([Type.String(), Type.Array(AnyBlock)])),
  stop_sequences: Type.Optional(Type.Array(Type.String(), { maxItems: MAX_STOP })),
  stream: Type.Optional(Type.Boolean()),
  temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  tools: Type.Optional(Type.Array(Type.Object({ name: Type.String() }, { additionalProperties: true }))),
  tool_choice: Type.Optional(AnyBlock),
  metadata: Type.Optional(Type.Object({ user_id: Type.Optional(Type.String()) })),
})

const checker = TypeCompiler.Compile(MessagesBody)

/** A Messages body as a chat completions body (which the pipeline then validates as any). */
export function chatBodyOfMessages(body: unknown): Record<string, unknown> | ApiError {
  const read = readMessages(body)
  if (isApiError(read)) return read
  // The schema decides what is taken; `readMessages` says which field is at fault, and how.
  return checker.Check(body) ? read : apiError('feature_not_supported', 'The request body is not a Messages request.')
}

function readMessages(body: unknown): Record<string, unknown> | ApiError {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return unsupported('body', 'The request body must be a JSON object.')
  const b = body as Record<string, unknown>
  if (typeof b.model !== 'string' || b.model === '') return unsupported('model', 'model must be a non-empty string.')
  if (!Number.isInteger(b.max_tokens) || (b.max_tokens as number) < 1)
    return unsupported('max_tokens', 'max_tokens is required: a positive integer.')
  if (!Array.isArray(b.messages) || b.messages.length === 0)
    return unsupported('messages', 'messages must be a non-empty array.')
  const messages: ChatMessage[] = []
  const system = systemOf(b.system)
  if (typeof system !== 'string') return system
  if (system !== '') messages.push({ role: 'system', content: system })
  for (const [i, m] of (b.messages as unknown[]).entries()) {
    const read = messageOf(m, `messages[${i}]`)
    if (!Array.isArray(read)) return read
    messages.push(...read)
  }
  const chat: Record<string, unknown> = { model: b.model, messages, max_tokens: b.max_tokens }
  for (const f of ['temperature', 'top_p', 'stream'] as const) if (b[f] !== undefined) chat[f] = b[f]
  if (b.stream === true) chat.stream_options = { include_usage: true }
  if (b.stop_sequences !== undefined) {
    const stop = b.stop_sequences
    if (!Array.isArray(stop) || !stop.every((s) => typeof s === 'string'))
      return unsupported('stop_sequences', 'stop_sequences must be an array of strings.')
    if (stop.length > MAX_STOP)
      return unsupported(
        'stop_sequences',
        `at most ${MAX_STOP} stop_sequences are supported; ${stop.length} were sent.`,
      )
    if (stop.length) chat.stop = stop
  }
  const metadata = b.metadata as { user_id?: unknown } | undefined
  if (typeof metadata?.user_id === 'string') chat.user = metadata.user_id
  if (b.tools !== undefined) {
    const tools = toolsOf(b.tools)
    if (!Array.isArray(tools)) return tools
    if (tools.length) chat.tools = tools
  }
  if (b.tool_choice !== undefined) {
    const choice = toolChoiceOf(b.tool_choice)
    if ('code' in choice) return choice
    Object.assign(chat, choice)
  }
  return chat
}

function systemOf(system: unknown): string | ApiError {
  if (system === undefined) return ''
  if (typeof system === 'string') return system
  if (Array.isArray(system) && system.every(isText)) return system.map((s) => asBlock(s).text as string).join('\n\n')
  return unsupported('system', 'system must be a string or an array of text blocks.')
}

/** One Anthropic message as chat messages: a user turn's tool results become tool messages before its text. */
function messageOf(m: unknown, at: string): ChatMessage[] | ApiError {
  const msg = m as { role?: unknown; content?: unknown } | null
  if (!msg || (msg.role !== 'user' && msg.role !== 'assistant'))
    return unsupported(`${at}.role`, 'role must be "user" or "assistant".')
  if (typeof msg.content === 'string') return [{ role: msg.role, content: msg.content }]
  if (!Array.isArray(msg.content))
    return unsupported(`${at}.content`, 'content must be a string or an array of blocks.')
  const text: string[] = []
  /** A user turn's parts in order, once it holds an image (chat's `image_url` parts). */
  let parts: Record<string, unknown>[] | undefined
  const calls: unknown[] = []
  const results: ChatMessage[] = []
  for (const [j, raw] of (msg.content as unknown[]).entries()) {
    const block = asBlock(raw)
    const where = `${at}.content[${j}]`
    switch (block.type) {
      case 'text':
        if (typeof block.text !== 'string') return unsupported(`${where}.text`, 'a text block needs its text.')
        text.push(block.text)
        parts?.push({ type: 'text', text: block.text })
        break
      case 'image': {
        if (msg.role !== 'user') return unsupported(where, 'image blocks belong to user messages.')
        const url = imageUrlOf(block.source)
        if (url === undefined)
          return unsupported(
            `${where}.source`,
            'an image source is {type: "base64", media_type, data} or {type: "url", url}.',
          )
        parts ??= text.map((t) => ({ type: 'text', text: t }))
        parts.push({ type: 'image_url', image_url: { url } })
        break
      }
      case 'tool_use':
        if (msg.role !== 'assistant') return unsupported(where, 'tool_use blocks belong to assistant messages.')
        if (typeof block.id !== 'string' || typeof block.name !== 'string')
          return unsupported(where, 'a tool_use block needs its id and name.')
        calls.push({
          id: block.id,
          type: 'function',
          function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) },
        })
        break
      case 'tool_result': {
        if (msg.role !== 'user') return unsupported(where, 'tool_result blocks belong to user messages.')
        if (typeof block.tool_use_id !== 'string')
          return unsupported(where, 'a tool_result block needs its tool_use_id.')
        const content = resultText(block.content)
        if (content === undefined)
          return unsupported(`${where}.content`, 'a tool_result holds a string or text blocks.')
        results.push({
          role: 'tool',
          tool_call_id: block.tool_use_id,
          content: block.is_error ? `Error: ${content}` : content,
        })
        break
      }
      case 'thinking':
      case 'redacted_thinking':
        // The model's earlier reasoning is not sent back to it.
        break
      default:
        return unsupported(
          `${where}.type`,
          `content blocks of type ${JSON.stringify(block.type)} are not supported; send text, tool_use or tool_result.`,
        )
    }
  }
  const out: ChatMessage[] = [...results]
  if (msg.role === 'assistant')
    out.push({ role: 'assistant', content: text.join(''), ...(calls.length ? { tool_calls: calls } : {}) })
  else if (parts) out.push({ role: 'user', content: parts })
  else if (text.length || results.length === 0) out.push({ role: 'user', content: text.join('\n') })
  return out
}

/** An image block's source as a chat image URL: a data URL of its base64 data, or its URL. */
function imageUrlOf(source: unknown): string | undefined {
  const s = asBlock(source)
  if (s.type === 'base64' && typeof s.media_type === 'string' && typeof s.data === 'string')
    return `data:${s.media_type};base64,${s.data}`
  if (s.type === 'url' && typeof s.url === 'string') return s.url
  return undefined
}

function resultText(content: unknown): string | undefined {
  if (content === undefined) return ''
  if (typeof content === 'string') return content
  if (Array.isArray(content) && content.every(isText)) return content.map((c) => asBlock(c).text as string).join('')
  return undefined
}

function toolsOf(tools: unknown): unknown[] | ApiError {
  if (!Array.isArray(tools)) return unsupported('tools', 'tools must be an array.')
  const out: unknown[] = []
  for (const [i, raw] of (tools as unknown[]).entries()) {
    const t = asBlock(raw)
    if (t.type !== undefined && t.type !== 'custom')
      return unsupported(`tools[${i}].type`, `server tools (${JSON.stringify(t.type)}) are not supported.`)
    if (typeof t.name !== 'string') return unsupported(`tools[${i}].name`, 'a tool needs its name.')
    out.push({
      type: 'function',
      function: {
        name: t.name,
        ...(typeof t.description === 'string' ? { description: t.description } : {}),
        parameters: t.input_schema ?? { type: 'object' },
      },
    })
  }
  return out
}

function toolChoiceOf(choice: unknown): Record<string, unknown> | ApiError {
  const c = choice as { type?: unknown; name?: unknown; disable_parallel_tool_use?: unknown } | null
  const parallel = c?.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {}
  switch (c?.type) {
    case 'auto':
      return { tool_choice: 'auto', ...parallel }
    case 'any':
      return { tool_choice: 'required', ...parallel }
    case 'none':
      return { tool_choice: 'none' }
    case 'tool':
      if (typeof c.name !== 'string') return unsupported('tool_choice.name', 'tool_choice of type tool names the tool.')
      return { tool_choice: { type: 'function', function: { name: c.name } }, ...parallel }
    default:
      return unsupported('tool_choice.type', 'tool_choice.type must be auto, any, tool or none.')
  }
}

/** Anthropic's error types, by our codes: the body a client of Anthropic's SDK reads. */
export const ANTHROPIC_ERROR_TYPE: Record<ErrorCode, string> = {
  feature_not_supported: 'invalid_request_error',
  invalid_api_key: 'authentication_error',
  account_suspended: 'permission_error',
  model_not_found: 'not_found_error',
  insufficient_quota: 'billing_error',
  rate_limit_exceeded: 'rate_limit_error',
  provider_output_invalid: 'api_error',
  no_capacity: 'overloaded_error',
  stream_interrupted: 'api_error',
  session_required: 'authentication_error',
  sign_in_failed: 'authentication_error',
  csrf_failed: 'permission_error',
}

/** Anthropic's stop reasons, by the reply's finish reason. */
export function stopReasonOf(finish: string): 'end_turn' | 'max_tokens' | 'tool_use' {
  return finish === 'length' ? 'max_tokens' : finish === 'tool_calls' ? 'tool_use' : 'end_turn'
}
