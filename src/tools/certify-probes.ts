import type { ToolCall } from '../protocol/chat.js'
import type { ToolChoiceMode } from '../protocol/models.js'
import { callPolicyOf, invalidToolCall } from './assemble.js'
import { schemaMismatch } from './schema-check.js'

/** What one request to the upstream under test produced: the reply, or why there was none. */
export type Exchange = { ok: true; content: string; calls: ToolCall[] } | { ok: false; detail: string }

/** Sends one request body (without model and stream) to the upstream under test. */
export type Send = (body: Probe, stream: boolean) => Promise<Exchange>

export interface ProbeOutcome {
  passed: boolean
  detail: string
  /** Largest argument document of the reply, in bytes. */
  bytes?: number
}

type Probe = Record<string, unknown> & { messages: Record<string, unknown>[] }
type FunctionTool = {
  type: 'function'
  function: { name: string; strict?: boolean; parameters: Record<string, unknown> }
}

const fn = (name: string, parameters: Record<string, unknown>, strict?: boolean): FunctionTool => ({
  type: 'function',
  function: { name, ...(strict ? { strict } : {}), parameters },
})
const WEATHER = fn('get_weather', {
  type: 'object',
  properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
})
const TIME = fn('get_time', { type: 'object', properties: { timezone: { type: 'string' } }, required: ['timezone'] })
const TOOLS = [WEATHER, TIME]
const FLIGHT = fn(
  'book_flight',
  {
    type: 'object',
    properties: {
      from: { type: 'string' },
      to: { type: 'string' },
      passengers: { type: 'integer', minimum: 1 },
      cabin: { type: 'string', enum: ['economy', 'business'] },
    },
    required: ['from', 'to', 'passengers', 'cabin'],
    additionalProperties: false,
  },
  true,
)
const CITY_SCHEMA = {
  type: 'object',
  properties: { city: { type: 'string' }, country: { type: 'string' } },
  required: ['city', 'country'],
  additionalProperties: false,
}
const ASK_WEATHER = 'What is the weather in Paris? Use the get_weather tool.'
/** `{"document":""}`: what an argument document of the size probe holds besides the document itself. */
const DOCUMENT_OVERHEAD = 15

const user = (content: string) => ({ role: 'user', content })
const pass = (detail: string, bytes?: number): ProbeOutcome => ({
  passed: true,
  detail,
  ...(bytes !== undefined ? { bytes } : {}),
})
const fail = (detail: string): ProbeOutcome => ({ passed: false, detail })
const largest = (calls: ToolCall[]) => Math.max(0, ...calls.map((c) => Buffer.byteLength(c.function.arguments)))
const names = (calls: ToolCall[]) => calls.map((c) => c.function.name).join(', ') || 'no call'

/** The calls of a reply, or why the reply fails the request's own tool rules (the gateway's validation). */
function validCalls(body: Probe, x: Exchange): ToolCall[] | string {
  if (!x.ok) return x.detail
  const policy = callPolicyOf(body as Parameters<typeof callPolicyOf>[0])
  return invalidToolCall(x.calls, { ...policy, maxArgumentBytes: 0 }) ?? x.calls
}

const ASK_TIME = 'What time is it in Tokyo? Use the get_time tool.'

/**
 * What a named choice's repeats ask, in turn: the message, and the tool the choice names. It names a tool the message
 * does not ask for but once (the first, where a model that ignores the choice calls its first tool by chance), so that
 * obeying it every time is not the model's own preference.
 */
const NAMED_ASKS: readonly { ask: string; named: string }[] = [
  { ask: 'Say hello.', named: 'get_weather' },
  { ask: ASK_WEATHER, named: 'get_time' },
  { ask: ASK_TIME, named: 'get_weather' },
]
/** What auto and none repeats ask, in turn, and the tool an auto reply must call. */
const ASKS: readonly { ask: string; tool: string }[] = [
  { ask: ASK_WEATHER, tool: 'get_weather' },
  { ask: ASK_TIME, tool: 'get_time' },
]

/**
 * One tool_choice mode, plain or streamed, asked `repeats` times with other messages and sampling pinned (temperature
 * 0, a seed per repeat, so a rerun asks the same): every reply must obey it. A model that complied by chance once
 * (calling the named tool because it would have anyway) is not certified for the mode.
 */
export async function toolChoiceProbe(
  send: Send,
  mode: ToolChoiceMode,
  stream: boolean,
  repeats = 1,
): Promise<ProbeOutcome> {
  let bytes = 0
  const seen: string[] = []
  for (let k = 0; k < repeats; k++) {
    const outcome = await toolChoiceOnce(send, mode, stream, k)
    if (!outcome.passed) return repeats === 1 ? outcome : fail(`repeat ${k + 1} of ${repeats}: ${outcome.detail}`)
    bytes = Math.max(bytes, outcome.bytes ?? 0)
    seen.push(outcome.detail)
  }
  return pass(repeats === 1 ? seen[0]! : `${repeats} of ${repeats}: ${seen.join('; ')}`, bytes || undefined)
}

async function toolChoiceOnce(send: Send, mode: ToolChoiceMode, stream: boolean, k: number): Promise<ProbeOutcome> {
  const named = NAMED_ASKS[k % NAMED_ASKS.length]!
  const asked = ASKS[k % ASKS.length]!
  const tool_choice = mode === 'named' ? { type: 'function', function: { name: named.named } } : mode
  const message = mode === 'required' ? 'Say hello.' : mode === 'named' ? named.ask : asked.ask
  const body: Probe = {
    messages: [user(message)],
    tools: TOOLS,
    tool_choice,
    max_tokens: 256,
    temperature: 0,
    seed: 1 + k,
  }
  const x = await send(body, stream)
  const calls = validCalls(body, x)
  if (typeof calls === 'string') return fail(calls)
  if (mode === 'none') return x.ok && x.content.trim() ? pass('text reply, no call') : fail('no text reply')
  if (mode === 'auto' && !calls.some((c) => c.function.name === asked.tool))
    return fail(`expected a ${asked.tool} call, got ${names(calls)}`)
  return pass(names(calls), largest(calls))
}

/** parallel_tool_calls true must yield both calls in one turn; false must yield exactly one. */
export async function parallelProbe(send: Send, parallel: boolean): Promise<ProbeOutcome> {
  const body: Probe = {
    messages: [user('Call get_weather for Paris and get_time for Europe/Paris, both in this turn.')],
    tools: TOOLS,
    parallel_tool_calls: parallel,
    max_tokens: 256,
  }
  const calls = validCalls(body, await send(body, parallel))
  if (typeof calls === 'string') return fail(calls)
  if (!parallel) return calls.length === 1 ? pass(names(calls)) : fail('expected one call, got none')
  const called = new Set(calls.map((c) => c.function.name))
  return called.has('get_weather') && called.has('get_time')
    ? pass(names(calls))
    : fail(`expected get_weather and get_time in one turn, got ${names(calls)}`)
}

/** A strict tool schema: accepted, and the arguments conform to it exactly. */
export async function strictToolProbe(send: Send): Promise<ProbeOutcome> {
  const body: Probe = {
    messages: [user('Book a flight from Paris to Rome for 2 passengers in economy with book_flight.')],
    tools: [FLIGHT],
    max_tokens: 256,
  }
  const calls = validCalls(body, await send(body, false))
  if (typeof calls === 'string') return fail(calls)
  if (calls.length !== 1) return fail(`expected one book_flight call, got ${names(calls)}`)
  const why = schemaMismatch(FLIGHT.function.parameters, JSON.parse(calls[0]!.function.arguments))
  return why ? fail(`arguments do not fit the strict schema: ${why}`) : pass('arguments fit the schema')
}

/** A strict json_schema response format: accepted, and the content conforms to it. */
export async function strictFormatProbe(send: Send): Promise<ProbeOutcome> {
  const body: Probe = {
    messages: [user('Name a European capital and its country, as JSON.')],
    max_tokens: 256,
    response_format: { type: 'json_schema', json_schema: { name: 'capital', strict: true, schema: CITY_SCHEMA } },
  }
  const x = await send(body, false)
  if (!x.ok) return fail(x.detail)
  let doc: unknown
  try {
    doc = JSON.parse(x.content)
  } catch {
    return fail('the content is not JSON')
  }
  const why = schemaMismatch(CITY_SCHEMA, doc)
  return why ? fail(`content does not fit the strict schema: ${why}`) : pass('content fits the schema')
}

/** An argument document of `bytes` bytes, streamed: it must arrive whole and valid. */
export async function argumentsProbe(send: Send, bytes: number): Promise<ProbeOutcome> {
  const length = bytes - DOCUMENT_OVERHEAD
  const tool = fn('save_document', {
    type: 'object',
    properties: { document: { type: 'string', minLength: length } },
    required: ['document'],
  })
  const body: Probe = {
    messages: [user(`Call save_document with a document of exactly ${length} characters.`)],
    tools: [tool],
    max_tokens: Math.ceil(bytes / 3) + 256,
  }
  const calls = validCalls(body, await send(body, true))
  if (typeof calls === 'string') return fail(calls)
  const size = largest(calls)
  return calls.length === 1 && size >= bytes
    ? pass(`${size} bytes`, size)
    : fail(`expected one save_document call of at least ${bytes} bytes, got ${names(calls)} (${size} bytes)`)
}

/**
 * A short agent loop: each turn a call, the tool result fed back, then a text answer; turns alternate plain and
 * streamed.
 */
export async function agentLoopProbe(send: Send, turns: number): Promise<ProbeOutcome> {
  const questions = [
    ASK_WEATHER,
    'And the local time in Europe/Paris? Use get_time.',
    'Check the weather in Paris once more with get_weather.',
  ]
  const messages: Record<string, unknown>[] = []
  for (let i = 0; i < turns; i++) {
    const stream = i % 2 === 1
    messages.push(user(questions[i % questions.length]!))
    const call: Probe = { messages, tools: TOOLS, max_tokens: 256 }
    const x = await send(call, stream)
    const calls = validCalls(call, x)
    if (typeof calls === 'string') return fail(`turn ${i + 1}: ${calls}`)
    if (calls.length === 0) return fail(`turn ${i + 1}: no tool call`)
    messages.push({ role: 'assistant', content: x.ok && x.content ? x.content : null, tool_calls: calls })
    for (const c of calls)
      messages.push({
        role: 'tool',
        tool_call_id: c.id,
        content: JSON.stringify({ ok: true, tool: c.function.name, result: 18 }),
      })
    const answer = await send({ messages, tools: TOOLS, max_tokens: 256 }, stream)
    if (!answer.ok) return fail(`turn ${i + 1}, after the tool result: ${answer.detail}`)
    if (answer.calls.length > 0)
      return fail(`turn ${i + 1}: called ${names(answer.calls)} again instead of answering the tool result`)
    if (!answer.content.trim()) return fail(`turn ${i + 1}: empty answer after the tool result`)
    messages.push({ role: 'assistant', content: answer.content })
  }
  return pass(`${turns} turns`)
}

/** `n` streamed tool-call requests at once: every one must come back valid. */
export async function concurrencyProbe(send: Send, n: number): Promise<ProbeOutcome> {
  const outcomes = await Promise.all(Array.from({ length: n }, () => toolChoiceProbe(send, 'auto', true)))
  const failed = outcomes.filter((o) => !o.passed)
  return failed.length === 0
    ? pass(`${n} of ${n} valid`)
    : fail(`${failed.length} of ${n} failed, e.g. ${failed[0]!.detail}`)
}
