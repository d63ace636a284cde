import { clipped, unsupported, type ApiError } from '../../protocol/errors.js'
import type { ResponseEcho, ResponsesRequest } from '../../protocol/responses.js'

type Raw = Record<string, unknown>

/** Each present field of `from` among `keys`, copied. */
function present(from: Raw, keys: readonly string[]): Raw {
  const out: Raw = {}
  for (const k of keys) if (from[k] !== undefined) out[k] = from[k]
  return out
}

/** Function tools in the chat completions shape; any other tool type refused, naming it. */
export function chatTools(tools: readonly Raw[]): Raw[] | ApiError {
  const out: Raw[] = []
  for (const [i, t] of tools.entries()) {
    if (t.type !== 'function') {
      return unsupported(
        `tools[${i}].type`,
        `tools[${i}] is a ${JSON.stringify(clipped(String(t.type)))} tool; only function tools are supported.`,
      )
    }
    out.push({ type: 'function', function: present(t, ['name', 'description', 'parameters', 'strict']) })
  }
  return out
}

/** tool_choice in the chat completions shape: auto, none, required, or a function named. */
export function chatToolChoice(choice: NonNullable<ResponsesRequest['tool_choice']>): unknown {
  if (typeof choice === 'string') return choice
  const name = (choice as Raw).name
  if (choice.type === 'function' && typeof name === 'string') return { type: 'function', function: { name } }
  return unsupported(
    'tool_choice',
    'tool_choice must be auto, none, required or {"type":"function","name":…}; only function tools are supported.',
  )
}

/** `text.format` as chat completions' response_format. */
export function chatFormat(format: Raw): Raw | ApiError {
  if (format.type === 'text' || format.type === 'json_object') return { type: format.type }
  if (format.type === 'json_schema')
    return { type: 'json_schema', json_schema: present(format, ['name', 'description', 'schema', 'strict']) }
  return unsupported('text.format.type', 'text.format.type must be text, json_object or json_schema.')
}

/** The fields of a chat request that a Responses request sets besides its messages, tools and format. */
export function chatFields(r: ResponsesRequest): Raw {
  const body: Raw = { model: r.model }
  if (r.max_output_tokens != null) body.max_tokens = r.max_output_tokens
  for (const k of ['temperature', 'top_p', 'parallel_tool_calls', 'stream', 'metadata', 'user'] as const)
    if (r[k] != null) body[k] = r[k]
  return body
}

/** What the response echoes of the request, as OpenAI's does. */
export function echoOf(r: ResponsesRequest): ResponseEcho {
  return {
    instructions: r.instructions ?? null,
    max_output_tokens: r.max_output_tokens ?? null,
    parallel_tool_calls: r.parallel_tool_calls ?? true,
    previous_response_id: r.previous_response_id ?? null,
    temperature: r.temperature ?? null,
    top_p: r.top_p ?? null,
    text: { format: r.text?.format ?? { type: 'text' } },
    tool_choice: r.tool_choice ?? 'auto',
    tools: r.tools ?? [],
    metadata: (r.metadata ?? {}) as Record<string, string>,
    store: r.store !== false,
  }
}

/** A chat request's field as the Responses request names it; `origins` name the items its messages came from. */
export function responsesParam(param: string, origins: readonly string[]): string {
  const message = /^messages\[(\d+)\]/.exec(param)
  if (message) return origins[Number(message[1])] ?? 'input'
  if (param === 'messages') return 'input'
  if (param === 'max_tokens' || param === 'max_completion_tokens') return 'max_output_tokens'
  if (param.startsWith('response_format')) return `text.format${param.slice(15).replace(/^\.json_schema/, '')}`
  if (param.startsWith('tool_choice.function')) return `tool_choice${param.slice(20)}`
  return param.replace(/^(tools\[\d+\])\.function/, '$1')
}
