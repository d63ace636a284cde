// OpenAI's own wire, the one every other engine imitates; reasoning as DeepSeek's API writes it (`reasoning_content`).
import type { SimReply } from '../reply.js'
import { toolDeltas } from '../wire.js'
import {
  DONE,
  nextSeed,
  sse,
  usageOf,
  type Dialect,
  type Frame,
  type StreamContext,
  openaiModelList,
} from './dialect.js'

function chunk(c: StreamContext, delta: Record<string, unknown>, finish: string | null = null, logprobs?: unknown) {
  return sse({
    id: c.id,
    object: 'chat.completion.chunk',
    created: c.created,
    model: c.model,
    choices: [{ index: 0, delta, ...(logprobs ? { logprobs } : {}), finish_reason: finish }],
  })
}

function* frames(reply: SimReply, c: StreamContext): Iterable<Frame> {
  yield { kind: 'head', text: chunk(c, { role: 'assistant', content: '' }) }
  for (const word of reply.reasoning) yield { kind: 'output', text: chunk(c, { reasoning_content: word }) }
  for (const [i, piece] of reply.pieces.entries()) {
    const logprobs = reply.logprobs && { content: [reply.logprobs[i]], refusal: null }
    yield { kind: 'output', text: chunk(c, { content: piece }, null, logprobs) }
  }
  for (const delta of toolDeltas(reply.toolCalls, c.fragmentation))
    yield { kind: 'output', text: chunk(c, { tool_calls: [delta] }) }
  yield { kind: 'tail', text: chunk(c, {}, reply.finish) }
  const usage = { id: c.id, object: 'chat.completion.chunk', created: c.created, model: c.model, choices: [] }
  yield { kind: 'tail', text: sse({ ...usage, usage: usageOf(reply) }) }
  yield { kind: 'tail', text: DONE }
}

function completion(reply: SimReply, c: StreamContext) {
  const content = reply.pieces.join('')
  return {
    id: c.id,
    object: 'chat.completion',
    created: c.created,
    model: c.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: content || (reply.toolCalls.length ? null : ''),
          ...(reply.reasoning.length ? { reasoning_content: reply.reasoning.join('') } : {}),
          ...(reply.toolCalls.length
            ? {
                tool_calls: reply.toolCalls.map((t) => ({
                  id: t.id,
                  type: 'function',
                  function: { name: t.name, arguments: t.arguments },
                })),
              }
            : {}),
        },
        ...(reply.logprobs ? { logprobs: { content: reply.logprobs, refusal: null } } : {}),
        finish_reason: reply.finish,
      },
    ],
    usage: usageOf(reply),
  }
}

const errorType = (status: number) => (status < 500 ? 'invalid_request_error' : 'server_error')

export const openai: Dialect = {
  completionId: () => `chatcmpl-sim${nextSeed().toString(36)}`,
  frames,
  streamError: (status, message) => sse({ error: { message, type: errorType(status), param: null, code: null } }),
  completion: (reply, c) => JSON.stringify(completion(reply, c)),
  errorReply: (status, message) => ({ status, body: { error: { message, type: errorType(status) } } }),
  modelList: (names) => openaiModelList(names, 'simulated'),
  abortReason: 'abort',
  behaviour: {},
}
