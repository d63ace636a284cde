import { describe, expect, it, vi } from 'vitest'
import { ChunkStream } from './chunk-stream.js'
import { chunkEvents, replyEvents } from './openai-chunks.js'
import { modelNames } from './engine-models.js'
import { SseParser } from './sse-parser.js'
import type { UpstreamEvent } from './types.js'
import { DIALECT_NAMES, DIALECTS, type StreamContext } from './simulated/dialects/index.js'
import type { SimReply } from './simulated/reply.js'

// Each engine's wire as the simulated upstream writes it (src/providers/simulated/dialects/), read by the adapter.

const PIECES = ['Hello', ' <b>&amp;', ' "quoted"', ' back\\slash', ' é 😀', ' line\nend', ...Array(24).fill(' word')]
const reply = (over: Partial<SimReply> = {}): SimReply => ({
  reasoning: ['Let', ' me', ' think'],
  pieces: [...PIECES],
  toolCalls: [],
  finish: 'stop',
  promptTokens: 7,
  ...over,
})
const ctx = (dialect: (typeof DIALECT_NAMES)[number]): StreamContext => ({
  model: 'm',
  id: DIALECTS[dialect].completionId(),
  created: 1_700_000_000,
  usage: true,
  fragmentation: 'split',
})
const streamText = (dialect: (typeof DIALECT_NAMES)[number], r = reply()) =>
  [...DIALECTS[dialect].frames(r, ctx(dialect))].map((f) => f.text).join('')

/** What the SSE parser and a parse of each event make of a stream: the reference the adapter must agree with. */
function reference(text: string): UpstreamEvent[] {
  const out: UpstreamEvent[] = []
  for (const data of new SseParser().push(text)) {
    if (data === '[DONE]') break
    chunkEvents(JSON.parse(data), out)
  }
  return out
}

function read(pieces: Buffer[]): { events: UpstreamEvent[]; done: boolean } {
  const s = new ChunkStream()
  const events: UpstreamEvent[] = []
  for (const p of pieces) s.push(p, events)
  s.end(events)
  return { events, done: s.done }
}

const texts = (events: UpstreamEvent[], type: 'content' | 'reasoning') =>
  events.map((e) => (e.type === type ? e.text : '')).join('')

describe.each(DIALECT_NAMES)('the %s dialect', (dialect) => {
  const text = streamText(dialect)

  it('reads to the same events as the SSE parser and a parse, however the network cuts it; reasoning kept', () => {
    const whole = read([Buffer.from(text)])
    expect(whole.done).toBe(true)
    expect(whole.events).toEqual(reference(text))
    // TGI has no reasoning parser: its model's thinking is content.
    const thinking = dialect === 'tgi' ? '' : 'Let me think'
    expect(texts(whole.events, 'reasoning')).toBe(thinking)
    expect(texts(whole.events, 'content')).toBe((dialect === 'tgi' ? 'Let me think' : '') + PIECES.join(''))
    expect(whole.events.filter((e) => e.type === 'finish')).toEqual([{ type: 'finish', reason: 'stop' }])
    expect(whole.events.at(-1)).toEqual({ type: 'usage', promptTokens: 7, completionTokens: 33 })
    const bytes = Buffer.from(text)
    for (let i = 1; i < bytes.length; i += 7)
      expect(read([bytes.subarray(0, i), bytes.subarray(i)]), `cut at ${i}`).toEqual(whole)
  })

  it("reads most content chunks without a parse, in the engine's own key order", () => {
    const parse = vi.spyOn(JSON, 'parse')
    try {
      read([Buffer.from(text)])
      // The head, a chunk or two learned from, those with reasoning, escapes decoded, the finish and the usage.
      expect(parse.mock.calls.length).toBeLessThan(PIECES.length / 2)
    } finally {
      parse.mockRestore()
    }
  })

  it('ends a generation the engine gave up as broken, never as finished', () => {
    const r = reply({ pieces: PIECES.slice(0, 2), finish: DIALECTS[dialect].abortReason })
    const events = read([Buffer.from(streamText(dialect, r))]).events
    expect(events.some((e) => e.type === 'finish')).toBe(false)
    expect(events.find((e) => e.type === 'failure')).toMatchObject({
      failure: { kind: 'unavailable', detail: expect.stringContaining('finish_reason') },
    })
    const plain = replyEvents(JSON.parse(DIALECTS[dialect].completion(r, ctx(dialect))))
    expect(plain).toEqual([expect.objectContaining({ type: 'failure' })])
  })

  it("carries the status of the engine's errors, in a stream and in a reply", () => {
    const d = DIALECTS[dialect]
    const refused = d.streamError(400, 'bad request', ctx(dialect), 0)
    // Ollama answers such an error before streaming; the others inside their 200 stream.
    if (dialect !== 'ollama' && dialect !== 'openai') {
      const status = dialect === 'tgi' ? 422 : 400
      expect(read([Buffer.from(refused!)]).events).toEqual([
        { type: 'failure', failure: { kind: 'unavailable', detail: 'upstream error in stream: bad request', status } },
      ])
    }
    const { status, body } = d.errorReply(400, 'bad request')
    expect(status).toBe(dialect === 'tgi' ? 422 : 400)
    const events = replyEvents(body)
    expect(events).toHaveLength(1)
    expect(events[0]).toMatchObject({ type: 'failure', failure: { detail: 'upstream error: bad request' } })
  })
})

describe('finish reasons', () => {
  const finish = (reason: unknown) => {
    const out: UpstreamEvent[] = []
    chunkEvents({ choices: [{ index: 0, delta: {}, finish_reason: reason }] }, out)
    return out
  }
  it.each([
    ['stop', 'stop'],
    ['length', 'length'],
    ['tool_calls', 'tool_calls'],
    ['content_filter', 'content_filter'],
    ['function_call', 'tool_calls'],
    ['eos_token', 'stop'],
    ['stop_sequence', 'stop'],
  ])('%s is a finished reply (%s)', (given, reason) => {
    expect(finish(given)).toEqual([{ type: 'finish', reason }])
  })
  it.each(['abort', 'repetition', 'error', 'load', 'unload', 'something-new', 42])('%s is a broken one', (given) => {
    expect(finish(given)).toEqual([
      {
        type: 'failure',
        failure: { kind: 'unavailable', detail: expect.stringContaining('the upstream ended the generation') },
      },
    ])
  })
})

describe("an engine's model list", () => {
  it.each(DIALECT_NAMES)('%s: its names, in its own shape', (dialect) => {
    const names = ['qwen2.5-7b-instruct', 'llama-3.1-8b']
    expect(modelNames(JSON.parse(JSON.stringify(DIALECTS[dialect].modelList(names))))).toEqual(names)
  })
  it('one model object, and bodies of no known shape', () => {
    expect(modelNames({ id: 'tgi', object: 'model' })).toEqual(['tgi'])
    expect(modelNames({ models: [{ name: 'a' }, { model: 'b', name: 'x' }, {}] })).toEqual(['a', 'b'])
    expect(modelNames({ data: [{ id: 'a' }, { id: 'a' }, { id: 7 }] })).toEqual(['a'])
    for (const body of [[], 'x', null, {}, { data: 'x' }, { id: '' }]) expect(modelNames(body)).toBeNull()
  })
})
