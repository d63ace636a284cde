// Hugging Face's Text Generation Inference: `object` first, `id` empty, the role in every delta and no role chunk,
// `"usage":null` on every chunk, the finish reason on the last token as TGI names it (`eos_token`, `length`), one tool
// call only with id "0" on every delta and the name null after the first, no finish reason at all in a tool-call
// stream (and `eos_token` in a whole reply), no reasoning parser (a model's thinking arrives as content), an error
// inside a stream as `{"error":{"message","http_status_code"}}` then `[DONE]`, a plain error as
// `{"error":"…","error_type"}`, validation failing with 422.
import type { SimReply } from '../reply.js'
import { DONE, sse, usageOf, type Dialect, type Frame, type StreamContext, openaiModelList } from './dialect.js'

const FINGERPRINT = '3.3.4-sha-sim'

/** TGI's names of the finish reasons. */
const finishOf = (finish: string) => (finish === 'stop' || finish === 'tool_calls' ? 'eos_token' : finish)

function chunk(c: StreamContext, delta: Record<string, unknown>, finish: string | null = null) {
  return sse({
    object: 'chat.completion.chunk',
    id: '',
    created: c.created,
    model: c.model,
    system_fingerprint: FINGERPRINT,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    usage: null,
  })
}

function* frames(reply: SimReply, c: StreamContext): Iterable<Frame> {
  const call = reply.toolCalls[0]
  const text = [...reply.reasoning, ...reply.pieces]
  if (!call) {
    const last = text.length - 1
    for (const [i, piece] of text.entries())
      yield {
        kind: 'output',
        text: chunk(c, { role: 'assistant', content: piece }, i === last ? finishOf(reply.finish) : null),
      }
    if (text.length === 0)
      yield { kind: 'output', text: chunk(c, { role: 'assistant', content: '' }, finishOf(reply.finish)) }
  } else {
    for (const piece of text) yield { kind: 'output', text: chunk(c, { role: 'assistant', content: piece }) }
    const parts = [call.arguments.slice(0, 1), call.arguments.slice(1, 6), call.arguments.slice(6)].filter(Boolean)
    for (const [i, part] of parts.entries()) {
      const fn = { name: i === 0 ? call.name : null, arguments: part }
      const delta = { role: 'assistant', tool_calls: [{ index: 0, id: '0', type: 'function', function: fn }] }
      yield { kind: 'output', text: chunk(c, delta) }
    }
  }
  if (c.usage) {
    const head = { object: 'chat.completion.chunk', id: '', created: c.created, model: c.model }
    yield { kind: 'tail', text: sse({ ...head, system_fingerprint: FINGERPRINT, choices: [], usage: usageOf(reply) }) }
  }
  yield { kind: 'tail', text: DONE }
}

function completion(reply: SimReply, c: StreamContext) {
  const call = reply.toolCalls[0]
  const message: Record<string, unknown> = { role: 'assistant' }
  if (call)
    message.tool_calls = [{ id: '0', type: 'function', function: { name: call.name, arguments: call.arguments } }]
  else message.content = [...reply.reasoning, ...reply.pieces].join('')
  return {
    object: 'chat.completion',
    id: '',
    created: c.created,
    model: c.model,
    system_fingerprint: FINGERPRINT,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishOf(reply.finish) }],
    usage: usageOf(reply),
  }
}

/** TGI's status and error type for an error of `status`'s kind. */
function kindOf(status: number): { status: number; type: string } {
  if (status === 429) return { status, type: 'overloaded' }
  if (status < 500) return { status: 422, type: 'validation' }
  return { status: 424, type: 'generation' }
}

export const tgi: Dialect = {
  completionId: () => '',
  frames,
  streamError: (status, message) => `${sse({ error: { message, http_status_code: kindOf(status).status } })}${DONE}`,
  completion: (reply, c) => JSON.stringify(completion(reply, c)),
  errorReply: (status, message) => {
    const kind = kindOf(status)
    return { status: kind.status, body: { error: message, error_type: kind.type } }
  },
  modelList: (names) => openaiModelList(names, 'text-generation-inference'),
  abortReason: 'abort',
  behaviour: { parallel: false },
}
