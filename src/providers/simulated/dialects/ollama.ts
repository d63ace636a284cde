// Ollama's OpenAI layer (Go): the id `chatcmpl-` and a small number, `fp_ollama`, the role on the first chunk only,
// reasoning as `reasoning`, each tool call whole and all of them in one delta, the finish reason in a chunk of its own,
// `<`, `>` and `&` escaped as Go's JSON writes them, and an error after output began as an empty chunk with an empty
// model and a close without `[DONE]` (its error text is lost in the translation).
import type { SimReply } from '../reply.js'
import { alnum, DONE, usageOf, type Dialect, type Frame, type StreamContext, openaiModelList } from './dialect.js'

const FINGERPRINT = 'fp_ollama'

/** JSON as Go's encoding/json writes it: HTML's special characters escaped. */
const goJson = (value: unknown) =>
  JSON.stringify(value).replace(/[<>&]/g, (ch) => `\\u00${ch.charCodeAt(0).toString(16)}`)
const event = (value: unknown) => `data: ${goJson(value)}\n\n`

function chunk(c: StreamContext, delta: Record<string, unknown>, finish: string | null = null, model = c.model) {
  return event({
    id: c.id,
    object: 'chat.completion.chunk',
    created: c.created,
    model,
    system_fingerprint: FINGERPRINT,
    choices: [{ index: 0, delta, finish_reason: finish }],
  })
}

const callsOf = (reply: SimReply, c: StreamContext) =>
  reply.toolCalls.map((t, index) => ({
    id: `call_${alnum(c.created + index, 8).toLowerCase()}`,
    index,
    type: 'function',
    function: { name: t.name, arguments: t.arguments },
  }))

function* frames(reply: SimReply, c: StreamContext): Iterable<Frame> {
  let role: { role?: string } = { role: 'assistant' }
  const next = () => {
    const r = role
    role = {}
    return r
  }
  for (const word of reply.reasoning)
    yield { kind: 'output', text: chunk(c, { ...next(), content: '', reasoning: word }) }
  for (const piece of reply.pieces) yield { kind: 'output', text: chunk(c, { ...next(), content: piece }) }
  if (reply.toolCalls.length)
    yield { kind: 'output', text: chunk(c, { ...next(), content: '', tool_calls: callsOf(reply, c) }) }
  yield { kind: 'tail', text: chunk(c, { ...next(), content: '' }, reply.finish) }
  if (c.usage) {
    const head = { id: c.id, object: 'chat.completion.chunk', created: c.created, model: c.model }
    yield {
      kind: 'tail',
      text: event({ ...head, system_fingerprint: FINGERPRINT, choices: [], usage: usageOf(reply) }),
    }
  }
  yield { kind: 'tail', text: DONE }
}

function completion(reply: SimReply, c: StreamContext) {
  const message: Record<string, unknown> = { role: 'assistant', content: reply.pieces.join('') }
  if (reply.reasoning.length) message.reasoning = reply.reasoning.join('')
  if (reply.toolCalls.length) message.tool_calls = callsOf(reply, c)
  const body = {
    id: c.id,
    object: 'chat.completion',
    created: c.created,
    model: c.model,
    system_fingerprint: FINGERPRINT,
    choices: [{ index: 0, message, finish_reason: reply.finish }],
    usage: usageOf(reply),
  }
  return body
}

let served = 0

export const ollama: Dialect = {
  completionId: () => `chatcmpl-${(++served * 37) % 1000}`,
  frames,
  streamError: (_status, _message, c, output) =>
    output === 0 ? undefined : chunk(c, { role: 'assistant', content: '' }, null, ''),
  completion: (reply, c) => goJson(completion(reply, c)),
  errorReply: (status, message) => ({
    status,
    body: { error: { message, type: status < 500 ? 'invalid_request_error' : 'api_error', param: null, code: null } },
  }),
  modelList: (names) => openaiModelList(names, 'library'),
  abortReason: 'unload',
  behaviour: {},
}
