import { describe, expect, it, vi } from 'vitest'
import { chunkEvents, contentOfChunk, dataEvents, MAX_FAST_CHUNK } from './openai-chunks.js'
import { ChunkStream } from './chunk-stream.js'
import { SseParser } from './sse-parser.js'
import type { UpstreamEvent } from './types.js'

const HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m",'
const chunk = (delta: string, tail = '"finish_reason":null', head = HEAD) =>
  `${head}"choices":[{"index":0,"delta":{${delta}},${tail}}]}`

/** What the full parse makes of a text: the reference the fast path must agree with. */
function parsed(data: string): UpstreamEvent[] {
  const out: UpstreamEvent[] = []
  let value: unknown
  try {
    value = JSON.parse(data)
  } catch {
    return [{ type: 'failure', failure: { kind: 'invalid_output', detail: 'stream chunk is not JSON' } }]
  }
  chunkEvents(value, out)
  return out
}

const FAST = [
  chunk('"content":"Hello"'),
  chunk('"content":""'),
  chunk('"role":"assistant","content":""'),
  chunk('"content":" wor\\"ld\\\\ \\n\\t\\u00e9\\ud83d\\ude00 \\/"'),
  chunk('"content":"é 😀 \u2028"'),
  chunk('"content":"x"', '"logprobs":null,"finish_reason":null'),
  chunk('"content":"x"', '"finish_reason":null', `${HEAD}"system_fingerprint":"fp_1",`),
  chunk('"content":"x"', '"finish_reason":null', `${HEAD}"system_fingerprint":null,`),
  chunk(
    '"content":"x"',
    '"logprobs":null,"finish_reason":null',
    `${HEAD}"service_tier":"default","system_fingerprint":"fp_1",`,
  ).replace(/\}$/, ',"usage":null,"obfuscation":"a1B"}'),
  chunk('"content":"x"').replace(/\}$/, ',"usage":null}'),
]

const SLOW = [
  chunk('"content":"x"', '"finish_reason":"stop"'),
  chunk('"content":"x","refusal":null'),
  chunk('"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]'),
  chunk('"content":"x"').replace('"index":0', '"index":1'),
  chunk('"content":"x"').replace(',"model"', ', "model"'),
  chunk('"content":"x"').replace('chat.completion.chunk', 'chat.completion'),
  chunk('"content":"x"') + ' ',
  chunk('"content":"x"').slice(0, -1),
  chunk('"content":"\\x"'),
  chunk('"content":"\\u12g4"'),
  chunk('"content":"a\tb"'),
  chunk('"content":"a"b"'),
  chunk('"content":"x"').replace('"created":1700000000', '"created":"1700000000"'),
  chunk('"content":"x"').replace('"created":1700000000', '"created":01700000000'),
  chunk('"content":"x"').replace('"created":1700000000', '"created":-1'),
  `${HEAD}"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`,
  chunk('"content":"x"').replace(/\}$/, ',"usage":{"prompt_tokens":1,"completion_tokens":2}}'),
  chunk('"content":"x"').replace(/\}$/, ',"obfuscation":"a","usage":null}'),
  '{"error":{"message":"overloaded"}}',
  'not json',
]

describe('stream chunk data', () => {
  it('reads the usual content chunk without a parse, to the same events as the parse', () => {
    for (const data of FAST) {
      expect(contentOfChunk(data), data).toBeTypeOf('string')
      const out: UpstreamEvent[] = []
      dataEvents(data, out)
      expect(out, data).toEqual(parsed(data))
    }
    expect(contentOfChunk(FAST[3]!)).toBe(' wor"ld\\ \n\té😀 /')
  })

  it('parses every other text, and what is not valid JSON is invalid output', () => {
    for (const data of SLOW) {
      expect(contentOfChunk(data), data).toBeUndefined()
      const out: UpstreamEvent[] = []
      dataEvents(data, out)
      expect(out, data).toEqual(parsed(data))
    }
    const out: UpstreamEvent[] = []
    dataEvents(chunk('"content":"\\x"'), out)
    expect(out).toEqual([{ type: 'failure', failure: { kind: 'invalid_output', detail: 'stream chunk is not JSON' } }])
  })

  it("keeps an upstream's token counts only when a usage record can hold them", () => {
    const usage = (p: string, c: string) =>
      parsed(`${HEAD}"choices":[],"usage":{"prompt_tokens":${p},"completion_tokens":${c}}}`)
    expect(usage('3', '5')).toEqual([{ type: 'usage', promptTokens: 3, completionTokens: 5 }])
    expect(usage('0', '2147483647')).toEqual([{ type: 'usage', promptTokens: 0, completionTokens: 2147483647 }])
    for (const [p, c] of [
      ['1.5', '5'],
      ['3', '-1'],
      ['3000000000', '5'],
      ['3', '1e300'],
      ['"3"', '5'],
    ])
      expect(usage(p!, c!)).toEqual([])
  })

  it('takes time linear in the text when a long content does not match', () => {
    const long = chunk(`"content":"${'a\\n'.repeat(Math.floor((MAX_FAST_CHUNK - 200) / 3))}\\q"`)
    expect(long.length).toBeLessThanOrEqual(MAX_FAST_CHUNK)
    const started = performance.now()
    expect(contentOfChunk(long)).toBeUndefined()
    expect(performance.now() - started).toBeLessThan(500)
  })

  it('parses a content chunk longer than the match is tried on, to the same events', () => {
    const long = chunk(`"content":"${'\\n'.repeat(512 * 1024)}"`)
    const exec = vi.spyOn(RegExp.prototype, 'exec')
    try {
      expect(contentOfChunk(long)).toBeUndefined()
      const out: UpstreamEvent[] = []
      dataEvents(long, out)
      expect(out).toEqual([{ type: 'content', text: '\n'.repeat(512 * 1024) }])
      expect(exec).not.toHaveBeenCalled()
    } finally {
      exec.mockRestore()
    }
    const edge = chunk(`"content":"${'x'.repeat(MAX_FAST_CHUNK - chunk('"content":""').length)}"`)
    expect(edge).toHaveLength(MAX_FAST_CHUNK)
    expect(contentOfChunk(edge)).toBe('x'.repeat(MAX_FAST_CHUNK - chunk('"content":""').length))
  })

  it("clips an upstream's error message to what a failure's detail repeats", () => {
    const failure = (message: unknown) => {
      const out: UpstreamEvent[] = []
      chunkEvents({ error: { message } }, out)
      return out
    }
    const long = failure('x'.repeat(1024 * 1024))
    expect(long[0]?.type === 'failure' && long[0].failure.detail.length).toBeLessThanOrEqual(300)
    expect(long).toEqual([
      { type: 'failure', failure: { kind: 'unavailable', detail: `upstream error in stream: ${'x'.repeat(256)}…` } },
    ])
    expect(failure('overloaded')).toEqual([
      { type: 'failure', failure: { kind: 'unavailable', detail: 'upstream error in stream: overloaded' } },
    ])
    expect(failure(undefined)).toEqual([
      { type: 'failure', failure: { kind: 'unavailable', detail: 'upstream error in stream: unknown' } },
    ])
  })
})

/** What the SSE parser and `dataEvents` make of a stream cut into pieces: the reference for `ChunkStream`. */
function reference(pieces: string[]): { events: UpstreamEvent[]; done: boolean } {
  const parser = new SseParser()
  const events: UpstreamEvent[] = []
  let done = false
  for (const piece of pieces) {
    for (const data of parser.push(piece)) {
      if (data === '[DONE]') done = true
      else dataEvents(data, events)
    }
  }
  if (parser.end() === '[DONE]') done = true
  return { events, done }
}

function read(pieces: (string | Buffer)[]): { events: UpstreamEvent[]; done: boolean } {
  const reader = new ChunkStream()
  const events: UpstreamEvent[] = []
  for (const piece of pieces) reader.push(typeof piece === 'string' ? Buffer.from(piece) : piece, events)
  reader.end(events)
  return { events, done: reader.done }
}

describe('token log probabilities', () => {
  const events = (logprobs: unknown) => {
    const out: UpstreamEvent[] = []
    chunkEvents({ choices: [{ index: 0, delta: { content: 'Hi' }, logprobs }] }, out)
    return out
  }
  const entry = {
    token: 'Hi',
    logprob: -0.5,
    bytes: [72, 105],
    top_logprobs: [{ token: 'Hi', logprob: -0.5, bytes: [72, 105] }],
  }

  it('are passed on as their known fields only, whatever else an upstream puts beside them', () => {
    let deep: unknown = 1
    for (let i = 0; i < 10_000; i++) deep = [deep]
    const extra = { ...entry, deep, top_logprobs: [{ ...entry.top_logprobs[0], deep }] }
    expect(events({ content: [extra], refusal: null })).toEqual([{ type: 'content', text: 'Hi', logprobs: [entry] }])
    expect(events({ content: [{ token: 'Hi', logprob: -1 }] })).toEqual([
      { type: 'content', text: 'Hi', logprobs: [{ token: 'Hi', logprob: -1, bytes: null, top_logprobs: [] }] },
    ])
  })

  it('are left out when an entry is of another shape, and the content kept', () => {
    for (const bad of [
      [{}],
      [{ ...entry, logprob: '-1' }],
      [{ ...entry, bytes: [300] }],
      [{ ...entry, top_logprobs: Array(21).fill(entry.top_logprobs[0]) }],
    ]) {
      expect(events({ content: bad }), JSON.stringify(bad).slice(0, 80)).toEqual([{ type: 'content', text: 'Hi' }])
    }
  })
})

describe('ChunkStream', () => {
  const valid = SLOW.filter((d) => !parsed(d).some((e) => e.type === 'failure'))
  // Content events between the others, in every framing the parser reads: `data:` without its space, CRLF and CR
  // line ends, comments and other fields, an event of two data lines, and [DONE] left without its blank line.
  const text = [
    ...FAST.map((d) => `data: ${d}\n\n`),
    ...valid.map((d, i) => `data: ${d}\n\ndata: ${FAST[i % FAST.length]}\n\n`),
    `data:${FAST[0]}\n\n`,
    `data: ${FAST[0]}\r\n\r\n`,
    `data: ${FAST[4]}\r\r`,
    `: keep-alive\n\nevent: chunk\ndata: ${FAST[5]}\n\n`,
    `data: ${FAST[6]!.replace(',"choices"', ',\ndata: "choices"')}\n\n`,
    `data: ${FAST[7]}\n\n`,
    'data: [DONE]',
  ].join('')

  it('reads a stream to the same events as the SSE parser and a parse of each chunk, however the network cuts it', () => {
    const whole = reference([text])
    expect(whole.done).toBe(true)
    expect(whole.events.some((e) => e.type === 'failure')).toBe(false)
    expect(whole.events.filter((e) => e.type === 'content').length).toBeGreaterThan(FAST.length)
    // Cut between bytes, so inside characters too (the text holds two-, three- and four-byte ones).
    const bytes = Buffer.from(text)
    expect(bytes.length).toBeGreaterThan(text.length)
    expect(read([bytes])).toEqual(whole)
    for (let i = 1; i < bytes.length; i++)
      expect(read([bytes.subarray(0, i), bytes.subarray(i)]), `cut at ${i}`).toEqual(whole)
    let seed = 7
    const next = () => (seed = (seed * 48271) % 2147483647)
    for (let round = 0; round < 200; round++) {
      const pieces: Buffer[] = []
      for (let at = 0; at < bytes.length;) {
        const size = 1 + (next() % 400)
        pieces.push(bytes.subarray(at, at + size))
        at += size
      }
      expect(read(pieces), `round ${round}`).toEqual(whole)
    }
  })

  it('drops a byte order mark that opens the stream, and only that one', () => {
    const event = `data: ${FAST[0]}\n\n`
    // A second mark is no mark: it begins a line that is no field, as the SSE spec reads it.
    expect(read(['\uFEFF' + event + '\uFEFF' + event])).toEqual({ events: parsed(FAST[0]!), done: false })
    const mark = Buffer.from('\uFEFF')
    expect(read([mark.subarray(0, 1), Buffer.concat([mark.subarray(1), Buffer.from(event)])])).toEqual({
      events: parsed(FAST[0]!),
      done: false,
    })
  })

  it('matches whole content events in place, without the SSE parser', () => {
    const push = vi.spyOn(SseParser.prototype, 'push')
    try {
      const events: UpstreamEvent[] = []
      new ChunkStream().push(Buffer.from(FAST.map((d) => `data: ${d}\n\n`).join('')), events)
      expect(events).toEqual(FAST.flatMap((d) => parsed(d)))
      expect(push).not.toHaveBeenCalled()
    } finally {
      push.mockRestore()
    }
  })

  it('leaves a piece that begins inside an event to the parser, even when the piece looks like a whole event', () => {
    const notJson = { type: 'failure', failure: { kind: 'invalid_output', detail: 'stream chunk is not JSON' } }
    for (const first of [`data: ${FAST[1]}\n`, `data: ${FAST[1]}\r`, 'event: x\ndata: 1\r\n']) {
      const pieces = [first, `data: ${FAST[0]}\n\n`]
      expect(read(pieces), JSON.stringify(first)).toEqual(reference(pieces))
      expect(read(pieces).events, JSON.stringify(first)).toEqual([notJson])
    }
    // An unfinished line held back (a comment here): what follows belongs to it.
    const comment = [': ping ', `data: ${FAST[0]}\n\n`]
    expect(read(comment)).toEqual(reference(comment))
    expect(read(comment).events).toEqual([])
    // Two data lines are one event, even when the first is a whole chunk.
    const twoLines = [`data: ${FAST[0]}\ndata: ${FAST[0]}\n\n`]
    expect(read(twoLines)).toEqual(reference(twoLines))
    expect(read(twoLines).events).toEqual([notJson])
  })

  it('ends an event with a CR that ends the stream, which no LF can follow any more', () => {
    for (const end of ['\n\n', '\r\n\r\n', '\r\r']) {
      expect(read([`data: ${FAST[0]}${end}`]), JSON.stringify(end)).toEqual({ events: parsed(FAST[0]!), done: false })
      expect(read([`data: ${FAST[0]}\r`, '\r']), JSON.stringify(end)).toEqual({ events: parsed(FAST[0]!), done: false })
    }
    // A lone CR that may yet be half a CRLF is still waited for while the stream goes on.
    const events: UpstreamEvent[] = []
    const reader = new ChunkStream()
    reader.push(Buffer.from(`data: ${FAST[0]}\r\r`), events)
    expect(events).toEqual([])
    reader.push(Buffer.from('\n'), events)
    expect(events).toEqual(parsed(FAST[0]!))
  })

  it('leaves a content event longer than the match is tried on to the parser, and reads it to the same events', () => {
    const long = chunk(`"content":"${'\\n'.repeat(512 * 1024)}"`)
    const pieces = [`data: ${FAST[0]}\n\ndata: ${long}\n\ndata: ${FAST[1]}\n\n`]
    const push = vi.spyOn(SseParser.prototype, 'push')
    try {
      expect(read(pieces)).toEqual(reference(pieces))
      // The event before it was matched in place; the parser took the text from the long one on.
      expect(push.mock.calls[0]![0].startsWith(`data: ${long}\n\n`)).toBe(true)
    } finally {
      push.mockRestore()
    }
    expect(read(pieces).events).toEqual([
      ...parsed(FAST[0]!),
      { type: 'content', text: '\n'.repeat(512 * 1024) },
      ...parsed(FAST[1]!),
    ])
  })

  it('reads nothing after [DONE], in the same piece or later', () => {
    const after = `data: ${FAST[0]}\n\ndata: [DONE]\n\ndata: ${FAST[1]}\n\n`
    expect(read([after])).toEqual({ events: parsed(FAST[0]!), done: true })
    expect(read([after, `data: ${FAST[2]}\n\n`])).toEqual({ events: parsed(FAST[0]!), done: true })
  })

  it('stops reading a piece at its first failure', () => {
    const events: UpstreamEvent[] = []
    new ChunkStream().push(Buffer.from(`data: ${FAST[0]}\n\ndata: not json\n\ndata: ${FAST[0]}\n\n`), events)
    expect(events).toEqual([
      ...parsed(FAST[0]!),
      { type: 'failure', failure: { kind: 'invalid_output', detail: 'stream chunk is not JSON' } },
    ])
  })
})
