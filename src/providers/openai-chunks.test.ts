import { describe, expect, it } from 'vitest'
import { chunkEvents, contentOfChunk, dataEvents } from './openai-chunks.js'
import type { UpstreamEvent } from './types.js'

const HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m",'
const chunk = (delta: string, tail = '"finish_reason":null', head = HEAD) => `${head}"choices":[{"index":0,"delta":{${delta}},${tail}}]}`

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
  chunk('"content":"x"', '"logprobs":null,"finish_reason":null', `${HEAD}"service_tier":"default","system_fingerprint":"fp_1",`).replace(/\}$/, ',"usage":null,"obfuscation":"a1B"}'),
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

  it('takes time linear in the text when a long content does not match', () => {
    const long = chunk(`"content":"${'a\\n'.repeat(50_000)}\\q"`)
    const started = performance.now()
    expect(contentOfChunk(long)).toBeUndefined()
    expect(performance.now() - started).toBeLessThan(500)
  })
})
