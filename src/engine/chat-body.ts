import type { ChatFunctions, ChatHistoryItem, FunctionCallItem } from './node-llama.js'

/** Which call the model must make: any (auto), none, one of the tools (required), or the one named. */
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string }

/** A chat completions request as the engine generates it. */
export interface ChatBody {
  /** The conversation, ending in the model's turn: an empty one after a user message, or the one whose calls the
   *  tool messages answered (the model goes on with it). */
  history: ChatHistoryItem[]
  maxTokens?: number
  temperature: number
  seed?: number
  stream: boolean
  /** `stream_options.include_usage`. */
  usage: boolean
  /** The tools offered, by name, with their parameters' JSON schemas. */
  tools?: ChatFunctions
  toolChoice: ToolChoice
  /** `response_format`: JSON of any shape, or of one schema. */
  format?: { type: 'json' } | { type: 'schema'; schema: unknown }
}

export class BadRequest extends Error {}

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content))
    return content.map((p) => (typeof p?.text === 'string' ? (p.text as string) : '')).join('')
  return ''
}

/** A call's arguments as the model wrote them: their JSON, or the text itself when it is not JSON. */
function paramsOf(text: unknown): unknown {
  if (typeof text !== 'string') return {}
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * The messages as the model's history. An assistant message's tool calls are calls of its turn, and the tool messages
 * after it their results: a conversation that ends in tool results ends in that turn, which the model goes on with.
 */
function historyOf(messages: unknown[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = []
  /** The calls of the last assistant message that no tool message answered yet, by id. */
  let open = new Map<string, FunctionCallItem>()
  for (const m of messages) {
    if (!isObject(m)) throw new BadRequest('each message must be an object')
    const text = textOf(m.content)
    if (m.role === 'tool') {
      const call = open.get(String(m.tool_call_id))
      if (!call) throw new BadRequest('a tool message must answer a tool call of the assistant message before it')
      call.result = paramsOf(text)
      open.delete(String(m.tool_call_id))
      continue
    }
    if (open.size > 0)
      throw new BadRequest('every tool call must be answered by a tool message before the next message')
    if (m.role === 'system' || m.role === 'developer') history.push({ type: 'system', text })
    else if (m.role === 'user') history.push({ type: 'user', text })
    else if (m.role === 'assistant') {
      const calls = Array.isArray(m.tool_calls) ? m.tool_calls : []
      open = new Map(
        calls.map((c: unknown, i): [string, FunctionCallItem] => {
          const fn = isObject(c) && isObject(c.function) ? c.function : undefined
          if (typeof fn?.name !== 'string') throw new BadRequest(`tool_calls[${i}] must name its function`)
          const id = isObject(c) && typeof c.id === 'string' ? c.id : String(i)
          return [id, { type: 'functionCall', name: fn.name, params: paramsOf(fn.arguments), result: null }]
        }),
      )
      history.push({ type: 'model', response: [...(text ? [text] : []), ...open.values()] })
    } else throw new BadRequest(`unknown message role ${JSON.stringify(m.role)}`)
  }
  const last = history.at(-1)
  const answered = messages.length > 0 && isObject(messages.at(-1)) && (messages.at(-1) as Json).role === 'tool'
  if (answered && open.size > 0) throw new BadRequest('every tool call must be answered by a tool message')
  if (answered) return history
  if (last?.type !== 'user') throw new BadRequest('the last message must be the user’s or a tool’s')
  return [...history, { type: 'model', response: [] }]
}

function toolsOf(tools: unknown): ChatFunctions | undefined {
  if (tools === undefined || tools === null) return undefined
  if (!Array.isArray(tools)) throw new BadRequest('tools must be an array')
  const functions: ChatFunctions = {}
  tools.forEach((t: unknown, i) => {
    const fn = isObject(t) && t.type === 'function' && isObject(t.function) ? t.function : undefined
    if (typeof fn?.name !== 'string' || !fn.name) throw new BadRequest(`tools[${i}] must be a function with a name`)
    functions[fn.name] = {
      ...(typeof fn.description === 'string' ? { description: fn.description } : {}),
      ...(isObject(fn.parameters) ? { params: fn.parameters } : {}),
    }
  })
  return tools.length ? functions : undefined
}

function toolChoiceOf(choice: unknown, tools: ChatFunctions | undefined): ToolChoice {
  if (choice === undefined || choice === null) return tools ? 'auto' : 'none'
  if (choice === 'auto' || choice === 'none' || choice === 'required') {
    if (choice === 'required' && !tools) throw new BadRequest('tool_choice required needs tools')
    return choice
  }
  const name = isObject(choice) && isObject(choice.function) ? choice.function.name : undefined
  if (typeof name !== 'string') throw new BadRequest('tool_choice must be auto, none, required or a named function')
  if (!tools || !(name in tools)) throw new BadRequest(`tool_choice names ${JSON.stringify(name)}, which is not a tool`)
  return { name }
}

function formatOf(format: unknown): ChatBody['format'] {
  if (format === undefined || format === null) return undefined
  if (!isObject(format)) throw new BadRequest('response_format must be an object')
  if (format.type === 'text') return undefined
  if (format.type === 'json_object') return { type: 'json' }
  if (format.type === 'json_schema' && isObject(format.json_schema) && isObject(format.json_schema.schema))
    return { type: 'schema', schema: format.json_schema.schema }
  throw new BadRequest('response_format must be text, json_object or json_schema with a schema')
}

/** The request as the engine generates it; BadRequest for a body the engine cannot serve. */
export function chatBody(body: unknown): ChatBody {
  if (!isObject(body)) throw new BadRequest('the body must be a JSON object')
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    throw new BadRequest('messages must be a non-empty array')
  const max = body.max_completion_tokens ?? body.max_tokens
  if (max !== undefined && max !== null && !(Number.isInteger(max) && (max as number) > 0))
    throw new BadRequest('max_tokens must be a positive integer')
  const temperature = body.temperature ?? 1
  if (typeof temperature !== 'number' || temperature < 0 || temperature > 2)
    throw new BadRequest('temperature must be a number from 0 to 2')
  const tools = toolsOf(body.tools)
  const format = formatOf(body.response_format)
  return {
    history: historyOf(body.messages),
    ...(typeof max === 'number' ? { maxTokens: max } : {}),
    temperature,
    ...(Number.isInteger(body.seed) ? { seed: body.seed as number } : {}),
    stream: body.stream === true,
    usage: isObject(body.stream_options) && body.stream_options.include_usage === true,
    ...(tools ? { tools } : {}),
    toolChoice: toolChoiceOf(body.tool_choice, tools),
    ...(format ? { format } : {}),
  }
}
