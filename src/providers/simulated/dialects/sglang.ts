// SGLang's OpenAI server: pydantic models dumped with their nulls (a delta always holds role, content,
// reasoning_content and tool_calls), `matched_stop` beside the finish reason, `"usage":null` on every chunk, `created`
// taken anew for each chunk, later tool fragments with `id` and `name` null, a flat error body
// (`{"object":"error",…,"code"}`), and an error inside a stream as `{"error": {…}}` then `[DONE]`.
import type { SimReply } from '../reply.js'
import {
  alnum,
  DONE,
  nextSeed,
  pythonJson,
  sse,
  usageOf,
  type Dialect,
  type Frame,
  type StreamContext,
  openaiModelList,
} from './dialect.js'

/** The token id of Qwen's `<|im_end|>`, which SGLang names as the stop it matched. */
const IM_END = 151645

const now = () => Math.floor(Date.now() / 1000)

function delta(fields: { role?: string; content?: string; reasoning_content?: string; tool_calls?: unknown[] }) {
  return {
    role: fields.role ?? null,
    content: fields.content ?? null,
    reasoning_content: fields.reasoning_content ?? null,
    tool_calls: fields.tool_calls ?? null,
  }
}

function chunk(c: StreamContext, d: ReturnType<typeof delta>, finish: string | null = null) {
  const matched = finish === 'stop' ? IM_END : null
  return sse({
    id: c.id,
    object: 'chat.completion.chunk',
    created: now(),
    model: c.model,
    choices: [{ index: 0, delta: d, logprobs: null, finish_reason: finish, matched_stop: matched }],
    usage: null,
  })
}

function* frames(reply: SimReply, c: StreamContext): Iterable<Frame> {
  yield { kind: 'head', text: chunk(c, delta({ role: 'assistant', content: '' })) }
  for (const word of reply.reasoning) yield { kind: 'output', text: chunk(c, delta({ reasoning_content: word })) }
  for (const piece of reply.pieces) yield { kind: 'output', text: chunk(c, delta({ content: piece })) }
  for (const [index, t] of reply.toolCalls.entries()) {
    const head = {
      id: `call_${alnum(c.created + index, 24)}`,
      index,
      type: 'function',
      function: { name: t.name, arguments: '' },
    }
    yield { kind: 'output', text: chunk(c, delta({ tool_calls: [head] })) }
    // The parser streams what it has parsed, and flushes the call's tail when the generation ends.
    const cut = Math.max(0, t.arguments.length - 2)
    for (const part of [t.arguments.slice(0, cut >> 1), t.arguments.slice(cut >> 1, cut), t.arguments.slice(cut)]) {
      const fragment = { id: null, index, type: 'function', function: { name: null, arguments: part } }
      if (part) yield { kind: 'output', text: chunk(c, delta({ tool_calls: [fragment] })) }
    }
  }
  yield { kind: 'tail', text: chunk(c, delta({}), reply.finish) }
  if (c.usage) {
    const usage = { ...usageOf(reply), prompt_tokens_details: null }
    yield {
      kind: 'tail',
      text: sse({ id: c.id, object: 'chat.completion.chunk', created: now(), model: c.model, choices: [], usage }),
    }
  }
  yield { kind: 'tail', text: DONE }
}

function completion(reply: SimReply, c: StreamContext) {
  const tools = reply.toolCalls.map((t, index) => ({
    id: `call_${alnum(c.created + index, 24)}`,
    index,
    type: 'function',
    function: { name: t.name, arguments: t.arguments },
  }))
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
          content: reply.pieces.join('') || null,
          reasoning_content: reply.reasoning.length ? reply.reasoning.join('') : null,
          tool_calls: tools.length ? tools : null,
        },
        logprobs: null,
        finish_reason: reply.finish,
        matched_stop: reply.finish === 'stop' ? IM_END : null,
      },
    ],
    usage: { ...usageOf(reply), prompt_tokens_details: null },
  }
}

const errorBody = (status: number, message: string) => ({
  object: 'error',
  message,
  type: status < 500 ? 'BadRequestError' : 'InternalServerError',
  param: null,
  code: status,
})

export const sglang: Dialect = {
  completionId: () => alnum(nextSeed(), 32).toLowerCase(),
  frames,
  streamError: (status, message) => `data: ${pythonJson({ error: errorBody(status, message) })}\n\n${DONE}`,
  completion: (reply, c) => JSON.stringify(completion(reply, c)),
  errorReply: (status, message) => ({ status, body: errorBody(status, message) }),
  modelList: (names) => openaiModelList(names, 'sglang', (id) => ({ root: id, max_model_len: 32768 })),
  abortReason: 'abort',
  behaviour: {},
}
