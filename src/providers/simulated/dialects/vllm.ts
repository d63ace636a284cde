// vLLM's OpenAI server: pydantic models in their field order, `logprobs` and `token_ids` null on every choice,
// `prompt_token_ids` on the first chunk, the finish reason (with `stop_reason`) on the last chunk that carries output,
// reasoning as `reasoning`, a tool call's name in a first delta without arguments and the arguments as diffs (the
// heads of parallel calls in one delta), errors written by `json.dumps` with `code` the status, then `[DONE]`.
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

function chunk(c: StreamContext, delta: Record<string, unknown>, finish: string | null, first = false) {
  const choice = {
    index: 0,
    delta,
    logprobs: null,
    finish_reason: finish,
    ...(finish ? { stop_reason: null } : {}),
    token_ids: null,
  }
  return sse({
    id: c.id,
    object: 'chat.completion.chunk',
    created: c.created,
    model: c.model,
    choices: [choice],
    ...(first ? { prompt_token_ids: null } : {}),
  })
}

const toolId = (c: StreamContext, index: number) => `chatcmpl-tool-${alnum(c.created + index, 32).toLowerCase()}`

/** A call's arguments as the diffs vLLM's tool parsers stream: about a dozen characters each. */
function diffs(args: string): string[] {
  const out: string[] = []
  for (let i = 0; i < args.length; i += 12) out.push(args.slice(i, i + 12))
  return out
}

function* frames(reply: SimReply, c: StreamContext): Iterable<Frame> {
  yield { kind: 'head', text: chunk(c, { role: 'assistant', content: '' }, null, true) }
  // The finish reason rides on the last output event, so each is built one step behind.
  const deltas: Record<string, unknown>[] = []
  for (const word of reply.reasoning) deltas.push({ reasoning: word })
  for (const piece of reply.pieces) deltas.push({ content: piece })
  if (reply.toolCalls.length) {
    deltas.push({
      tool_calls: reply.toolCalls.map((t, index) => ({
        id: toolId(c, index),
        type: 'function',
        index,
        function: { name: t.name },
      })),
    })
    for (const [index, t] of reply.toolCalls.entries())
      for (const part of diffs(t.arguments)) deltas.push({ tool_calls: [{ index, function: { arguments: part } }] })
  }
  if (deltas.length === 0) deltas.push({ content: '' })
  for (const [i, delta] of deltas.entries())
    yield { kind: 'output', text: chunk(c, delta, i === deltas.length - 1 ? reply.finish : null) }
  if (c.usage) {
    const u = usageOf(reply)
    const usage = {
      prompt_tokens: u.prompt_tokens,
      total_tokens: u.total_tokens,
      completion_tokens: u.completion_tokens,
    }
    const text = sse({
      id: c.id,
      object: 'chat.completion.chunk',
      created: c.created,
      model: c.model,
      choices: [],
      usage,
    })
    yield { kind: 'tail', text }
  }
  yield { kind: 'tail', text: DONE }
}

function completion(reply: SimReply, c: StreamContext) {
  const u = usageOf(reply)
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
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          tool_calls: reply.toolCalls.map((t, index) => ({
            id: toolId(c, index),
            type: 'function',
            function: { name: t.name, arguments: t.arguments },
          })),
          reasoning: reply.reasoning.length ? reply.reasoning.join('') : null,
        },
        logprobs: null,
        finish_reason: reply.finish,
        stop_reason: null,
        token_ids: null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: { ...u, prompt_tokens_details: null },
    prompt_logprobs: null,
    prompt_token_ids: null,
    kv_transfer_params: null,
  }
}

const errorBody = (status: number, message: string) => ({
  error: { message, type: status < 500 ? 'BadRequestError' : 'InternalServerError', param: null, code: status },
})

export const vllm: Dialect = {
  completionId: () => `chatcmpl-${alnum(nextSeed(), 32).toLowerCase()}`,
  frames,
  streamError: (status, message) => `data: ${pythonJson(errorBody(status, message))}\n\n${DONE}`,
  completion: (reply, c) => JSON.stringify(completion(reply, c)),
  errorReply: (status, message) => ({ status, body: errorBody(status, message) }),
  modelList: (names) =>
    openaiModelList(names, 'vllm', (id) => ({ root: id, parent: null, max_model_len: 32768, permission: [] })),
  abortReason: 'abort',
  behaviour: {},
}
