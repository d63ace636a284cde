// llama.cpp's `llama-server`: keys in its JSON library's insertion order (choices first), the role chunk's content
// null, the finish reason in a chunk of its own, usage with `timings`, tool arguments in fragments of one to three
// characters after a first `{"`, ids of 32 random characters, an error as an SSE `error:` field line and no `[DONE]`,
// a named tool_choice ignored (it reads tool_choice only as a string), and the connection closed right after a
// streamed reply though it answered `Keep-Alive`.
import type { SimReply } from '../reply.js'
import {
  alnum,
  DONE,
  nextSeed,
  sse,
  usageOf,
  type Dialect,
  type Frame,
  type StreamContext,
  openaiModelList,
} from './dialect.js'

const FINGERPRINT = 'b6123-sim'

function chunk(c: StreamContext, delta: Record<string, unknown>, finish: string | null = null) {
  return sse({
    choices: [{ finish_reason: finish, index: 0, delta }],
    created: c.created,
    id: c.id,
    model: c.model,
    system_fingerprint: FINGERPRINT,
    object: 'chat.completion.chunk',
  })
}

const usage = (reply: SimReply) => {
  const u = usageOf(reply)
  return { completion_tokens: u.completion_tokens, prompt_tokens: u.prompt_tokens, total_tokens: u.total_tokens }
}

const timings = (reply: SimReply) => ({
  prompt_n: reply.promptTokens,
  prompt_ms: 1.5,
  predicted_n: reply.reasoning.length + reply.pieces.length,
  predicted_ms: 3.25,
})

/** A call's arguments as the server streams them: `{"` with the name, then fragments of one to three characters. */
function argumentParts(args: string): string[] {
  const first = args.startsWith('{"') ? 2 : 0
  const parts = [args.slice(0, first)]
  for (let i = first, k = 0; i < args.length; k++) {
    const size = 1 + (k % 3)
    parts.push(args.slice(i, i + size))
    i += size
  }
  return parts
}

function* frames(reply: SimReply, c: StreamContext): Iterable<Frame> {
  yield { kind: 'head', text: chunk(c, { role: 'assistant', content: null }) }
  for (const word of reply.reasoning) yield { kind: 'output', text: chunk(c, { reasoning_content: word }) }
  for (const piece of reply.pieces) yield { kind: 'output', text: chunk(c, { content: piece }) }
  for (const [index, call] of reply.toolCalls.entries()) {
    const [head, ...rest] = argumentParts(call.arguments)
    const id = alnum(index + c.created, 32)
    const first = { index, id, type: 'function', function: { name: call.name, arguments: head } }
    yield { kind: 'output', text: chunk(c, { tool_calls: [first] }) }
    for (const part of rest)
      yield { kind: 'output', text: chunk(c, { tool_calls: [{ index, function: { arguments: part } }] }) }
  }
  yield { kind: 'tail', text: chunk(c, {}, reply.finish) }
  if (c.usage) {
    const last = { choices: [], created: c.created, id: c.id, model: c.model, system_fingerprint: FINGERPRINT }
    const text = sse({ ...last, object: 'chat.completion.chunk', usage: usage(reply), timings: timings(reply) })
    yield { kind: 'tail', text }
  }
  yield { kind: 'tail', text: DONE }
}

function completion(reply: SimReply, c: StreamContext) {
  const message: Record<string, unknown> = { role: 'assistant', content: reply.pieces.join('') || null }
  if (reply.reasoning.length) message.reasoning_content = reply.reasoning.join('')
  if (reply.toolCalls.length)
    message.tool_calls = reply.toolCalls.map((t, i) => ({
      type: 'function',
      function: { name: t.name, arguments: t.arguments },
      id: alnum(i + c.created, 32),
    }))
  return {
    choices: [{ finish_reason: reply.finish, index: 0, message }],
    created: c.created,
    model: c.model,
    system_fingerprint: FINGERPRINT,
    object: 'chat.completion',
    usage: usage(reply),
    id: c.id,
    timings: timings(reply),
  }
}

const errorData = (status: number, message: string) => ({
  code: status,
  message,
  type: status < 500 ? 'invalid_request_error' : 'server_error',
})

export const llamacpp: Dialect = {
  completionId: () => `chatcmpl-${alnum(nextSeed(), 32)}`,
  frames,
  streamError: (status, message) => `error: ${JSON.stringify(errorData(status, message))}\n\n`,
  completion: (reply, c) => JSON.stringify(completion(reply, c)),
  errorReply: (status, message) => ({ status, body: { error: errorData(status, message) } }),
  modelList: (names) => ({
    models: names.map((name) => ({ name, model: name, modified_at: '', size: '', digest: '', type: 'model' })),
    ...openaiModelList(names, 'llamacpp', () => ({ meta: { n_ctx_train: 4096, n_vocab: 151936 } })),
  }),
  abortReason: 'abort',
  behaviour: { toolChoice: ['auto', 'none', 'required'], toolChoiceUnsupported: 'ignore' },
  closeAfterStreamMs: 1,
}
