import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { chat, P, sseEvents, startMarket, type Market } from './helpers/market.js'
import { parseChunks, resetSims, TIME, TIME_ARGS, WEATHER, WEATHER_ARGS, type Chunk } from './helpers/tools.js'
import { countOutput } from '../src/metering/tokens.js'
import { toolDeltas, type Fragmentation } from '../src/providers/simulated/wire.js'

let m: Market
beforeAll(async () => {
  m = await startMarket()
})
afterAll(() => m?.close())
beforeEach(() => resetSims(m))

const both = {
  model: 'svc/atlas@1',
  messages: [{ role: 'user', content: 'Call get_weather and get_time' }],
  tools: [WEATHER, TIME],
  stream: true,
}
const toolChunk = (index: number, id: string, name: string, args: string) => ({
  index: 0,
  delta: { tool_calls: [{ index, id, type: 'function', function: { name, arguments: args } }] },
  finish_reason: null,
})
const idOf = (c: Chunk) => (c.choices[0]!.delta.tool_calls as { id: string }[])[0]!.id

/** The shape of each chunk, one word per chunk: role, content, tool, finish, usage, svc, error. */
function kinds(chunks: Chunk[]): string[] {
  return chunks.map((c) => {
    if (c.error) return 'error'
    if (c.svc) return 'svc'
    if (c.usage) return 'usage'
    const ch = c.choices[0]!
    if (ch.finish_reason) return `finish:${ch.finish_reason}`
    if (ch.delta.role) return 'role'
    if (ch.delta.tool_calls) return 'tool'
    return 'content'
  })
}

describe('tool calls reach a streaming client whole', () => {
  it.each<Fragmentation>(['whole', 'split', 'bytes', 'unindexed'])(
    'upstream fragmentation %s: role, one chunk per call, finish, usage, svc, [DONE]',
    async (fragmentation) => {
      m.sims.atlasCheap.settings.fragmentation = fragmentation
      const res = await chat(m.url, m.key, both)
      expect(res.status).toBe(200)
      const chunks = parseChunks(await sseEvents(res))
      expect(kinds(chunks)).toEqual(['role', 'tool', 'tool', 'finish:tool_calls', 'usage', 'svc'])
      expect(chunks[0]!.choices[0]).toEqual({
        index: 0,
        delta: { role: 'assistant', content: '' },
        finish_reason: null,
      })
      expect(chunks[1]!.choices).toEqual([toolChunk(0, idOf(chunks[1]!), 'get_weather', WEATHER_ARGS)])
      expect(chunks[2]!.choices).toEqual([toolChunk(1, idOf(chunks[2]!), 'get_time', TIME_ARGS)])
      expect(idOf(chunks[1]!)).not.toBe(idOf(chunks[2]!))
      expect(chunks[3]!.choices).toEqual([{ index: 0, delta: {}, finish_reason: 'tool_calls' }])
      expect(chunks[4]!.choices).toEqual([])
      expect(chunks[5]!.svc!.provider).toBe(P.atlasCheap)
      for (const c of chunks)
        expect(c).toMatchObject({
          object: 'chat.completion.chunk',
          model: 'svc/atlas@1',
          system_fingerprint: 'vllm-0.6:sim',
        })
    },
  )

  it('one-byte deltas really were one byte, interleaved by index (the simulator is adversarial)', async () => {
    const deltas = toolDeltas(
      [
        { id: 'a', name: 'x', arguments: '{"k":1}' },
        { id: 'b', name: 'y', arguments: '{}' },
      ],
      'bytes',
    )
    expect(deltas.map((d) => d.index)).toEqual([0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0])
    expect(deltas.slice(2).every((d) => (d.function as { arguments: string }).arguments.length === 1)).toBe(true)
  })

  it('content first, then the calls, then the finish chunk', async () => {
    m.sims.atlasCheap.settings.toolPreface = 'Let me check.'
    m.sims.atlasCheap.settings.fragmentation = 'bytes'
    const chunks = parseChunks(await sseEvents(await chat(m.url, m.key, both)))
    expect(kinds(chunks)).toEqual(['role', 'content', 'tool', 'tool', 'finish:tool_calls', 'usage', 'svc'])
    expect(chunks[1]!.choices[0]!.delta).toEqual({ content: 'Let me check.' })
    const calls = [
      { name: 'get_weather', arguments: WEATHER_ARGS },
      { name: 'get_time', arguments: TIME_ARGS },
    ]
    expect(chunks[5]!.usage!.completion_tokens).toBe(countOutput('Let me check.', calls))
  })

  it('sends the calls and the finish before the reply is charged, and the charge after', async () => {
    // The capture waits for a gate: what the client has by then went out before it was charged.
    const ledger = m.store.ledger
    const capture = ledger.capture.bind(ledger)
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    let asked = false
    ledger.capture = async (c) => {
      asked = true
      await gate
      return capture(c)
    }
    try {
      const res = await chat(m.url, m.key, both)
      const reader = res.body!.getReader()
      let text = ''
      while (!text.includes('"finish_reason":"tool_calls"'))
        text += new TextDecoder().decode((await reader.read()).value)
      expect(asked).toBe(true)
      expect(text).not.toContain('"usage"')
      open()
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value)
      const chunks = parseChunks(
        text
          .split('\n\n')
          .filter((e) => e.startsWith('data: '))
          .map((e) => e.slice(6)),
      )
      expect(kinds(chunks)).toEqual(['role', 'tool', 'tool', 'finish:tool_calls', 'usage', 'svc'])
    } finally {
      ledger.capture = capture
      open()
    }
  })

  it('a plain reply with preface text keeps the content and the calls', async () => {
    m.sims.atlasCheap.settings.toolPreface = 'Let me check.'
    const r = await (await chat(m.url, m.key, { ...both, stream: false })).json()
    expect(r.choices[0].message).toEqual({
      role: 'assistant',
      content: 'Let me check.',
      tool_calls: [
        {
          id: expect.stringMatching(/^call_/),
          type: 'function',
          function: { name: 'get_weather', arguments: WEATHER_ARGS },
        },
        { id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_time', arguments: TIME_ARGS } },
      ],
    })
    expect(r.choices[0].finish_reason).toBe('tool_calls')
  })

  it('a text reply after a tool result ends with finish stop and no tool chunk', async () => {
    const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: WEATHER_ARGS } }
    const messages = [
      both.messages[0],
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: '18C' },
    ]
    const chunks = parseChunks(await sseEvents(await chat(m.url, m.key, { ...both, messages, max_tokens: 3 })))
    expect(kinds(chunks)).toEqual(['role', 'content', 'content', 'content', 'finish:length', 'usage', 'svc'])
  })
})
