import { hash, replyWords, sampleFor } from './text.js'
import { FULL_BEHAVIOUR, type ModelBehaviour } from './behaviour.js'

/** What the simulated upstream answers to one request, decided before any byte is written. */
export interface SimReply {
  /** Reasoning words, streamed before the content (none unless `reasoningTokens` asks). */
  reasoning: string[]
  pieces: string[]
  toolCalls: { id: string; name: string; arguments: string }[]
  /** stop, length, tool_calls, or the engine's reason for a generation it gave up. */
  finish: string
  promptTokens: number
  /** One entry per piece when the request asked for `logprobs`, as OpenAI writes them. */
  logprobs?: TokenLogprob[]
  /** Output tokens its usage reports beyond those it sent (a provider that over-reports). */
  reportedExtra?: number
}

export interface TokenLogprob {
  token: string
  logprob: number
  bytes: number[]
  top_logprobs: { token: string; logprob: number; bytes: number[] }[]
}

/** Deterministic log probabilities of the pieces: the piece itself, then `top - 1` made-up alternatives. */
export function logprobsOf(pieces: readonly string[], top: number): TokenLogprob[] {
  return pieces.map((token, i) => {
    const logprob = -((hash(`${token}|${i}`) % 1000) / 1000)
    const entry = (t: string, lp: number) => ({ token: t, logprob: lp, bytes: [...Buffer.from(t)] })
    const alternatives = Array.from({ length: Math.max(0, top - 1) }, (_, k) =>
      entry(`${token.trim()}~${k + 1}`, logprob - 1 - k),
    )
    return { ...entry(token, logprob), top_logprobs: top > 0 ? [entry(token, logprob), ...alternatives] : [] }
  })
}

export interface ReplySettings {
  replyTokens: number
  /** Words of reasoning before the reply; `max_tokens` bounds both together, reasoning first. */
  reasoningTokens: number
  toolPreface: string
  ignoreMaxTokens: boolean
}

interface SimTool {
  type?: string
  function?: { name?: string; parameters?: Record<string, unknown> }
}

type Body = Record<string, unknown>

function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) return content.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('\n')
  return ''
}

function selectTools(body: Body, tools: SimTool[], lastText: string, parallel: boolean): SimTool[] {
  const choice = body.tool_choice as { function?: { name?: string } } | string | null | undefined
  if (typeof choice === 'object' && choice?.function?.name) {
    const named = tools.find((t) => t.function?.name === choice.function!.name)
    return named ? [named] : []
  }
  const mentioned = tools.filter((t) => t.function?.name && lastText.includes(t.function.name))
  const selected = mentioned.length ? mentioned : tools.slice(0, 1)
  return body.parallel_tool_calls === false || !parallel ? selected.slice(0, 1) : selected
}

/**
 * Plans the reply: tool calls when tools are offered and the turn is the user's (or, for a model that is not
 * agentic, even after a tool result), else deterministic words.
 */
export function planReply(body: Body, settings: ReplySettings, behaviour: ModelBehaviour = FULL_BEHAVIOUR): SimReply {
  const reply = planPieces(body, settings, behaviour)
  if (body.logprobs !== true) return reply
  return { ...reply, logprobs: logprobsOf(reply.pieces, typeof body.top_logprobs === 'number' ? body.top_logprobs : 0) }
}

function planPieces(body: Body, settings: ReplySettings, behaviour: ModelBehaviour): SimReply {
  const limit = settings.ignoreMaxTokens ? Infinity : Number(body.max_tokens ?? body.max_completion_tokens ?? Infinity)
  const thought = Math.min(settings.reasoningTokens, limit)
  const reasoning =
    thought > 0 ? replyWords(`${String(body.model)}|reasoning|${JSON.stringify(body.messages)}`, thought) : []
  if (thought < settings.reasoningTokens)
    return { reasoning, pieces: [], toolCalls: [], finish: 'length', promptTokens: promptTokensOf(body) }
  return { ...answerOf(body, settings, behaviour, limit - thought), reasoning }
}

function promptTokensOf(body: Body): number {
  const messages = Array.isArray(body.messages) ? (body.messages as { content?: unknown }[]) : []
  return Math.ceil(messages.reduce((n, m) => n + textOf(m.content).length, 0) / 4) + messages.length * 3
}

/** The reply after its reasoning, within `limit` tokens. */
function answerOf(
  body: Body,
  settings: ReplySettings,
  behaviour: ModelBehaviour,
  limit: number,
): Omit<SimReply, 'reasoning'> {
  const messages = Array.isArray(body.messages) ? (body.messages as { role?: string; content?: unknown }[]) : []
  const last = messages.at(-1)
  const lastText = textOf(last?.content)
  const promptTokens = promptTokensOf(body)
  const seed = `${String(body.model)}|${lastText}|${messages.length}`
  const tools = Array.isArray(body.tools) ? (body.tools as SimTool[]) : []
  if (tools.length && body.tool_choice !== 'none' && (last?.role !== 'tool' || !behaviour.agentic)) {
    const calls = selectTools(body, tools, lastText, behaviour.parallel).map((t, i) => ({
      id: `call_${hash(`${seed}|${i}`).toString(36)}`,
      name: t.function?.name ?? '',
      arguments: JSON.stringify(sampleFor(t.function?.parameters)),
    }))
    if (calls.length) {
      const pieces = settings.toolPreface ? [settings.toolPreface] : []
      return { pieces, toolCalls: calls, finish: 'tool_calls', promptTokens }
    }
  }
  const format = body.response_format as
    { type?: string; json_schema?: { schema?: Record<string, unknown> } } | undefined
  if (format?.type === 'json_object' || format?.type === 'json_schema') {
    const doc =
      format.type === 'json_schema' ? sampleFor(format.json_schema?.schema) : { answer: replyWords(seed, 3).join('') }
    return { pieces: [JSON.stringify(doc)], toolCalls: [], finish: 'stop', promptTokens }
  }
  const count = Math.min(settings.replyTokens, limit)
  return {
    pieces: replyWords(seed, count),
    toolCalls: [],
    finish: count < settings.replyTokens ? 'length' : 'stop',
    promptTokens,
  }
}
