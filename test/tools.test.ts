import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import type {
  ChatCompletion,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
} from 'openai/resources/chat/completions'
import { countOutput } from '../src/metering/tokens.js'
import { P, startMarket, type Market } from './helpers/market.js'
import { resetSims, TIME, TIME_ARGS, WEATHER, WEATHER_ARGS } from './helpers/tools.js'

let m: Market
let client: OpenAI
beforeAll(async () => {
  m = await startMarket()
  client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
})
afterAll(() => m?.close())
beforeEach(() => resetSims(m))

type FunctionCall = Extract<ChatCompletionMessageToolCall, { type: 'function' }>
const functionCalls = (r: ChatCompletion): FunctionCall[] =>
  (r.choices[0]!.message.tool_calls ?? []).filter((c): c is FunctionCall => c.type === 'function')
const calls = (r: ChatCompletion) => functionCalls(r).map((c) => [c.function.name, c.function.arguments])
const svcOf = (r: unknown) => (r as { svc: { cost_usdc: string; provider: string } }).svc
const ask = (content: string): ChatCompletionMessageParam[] => [{ role: 'user', content }]

describe('tool_choice through the openai SDK', () => {
  it('auto (the default): the call, content null, finish tool_calls, metered on name and arguments', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: ask('Use get_weather for Paris'),
      tools: [WEATHER, TIME],
    })
    expect(calls(r)).toEqual([['get_weather', WEATHER_ARGS]])
    expect(functionCalls(r)[0]!.id).toMatch(/^call_/)
    expect(r.choices[0]!.message.content).toBeNull()
    expect(r.choices[0]!.finish_reason).toBe('tool_calls')
    expect(r.usage!.completion_tokens).toBe(countOutput('', [{ name: 'get_weather', arguments: WEATHER_ARGS }]))
    expect(svcOf(r).provider).toBe(P.atlasCheap)
    expect(Number(svcOf(r).cost_usdc)).toBeGreaterThan(0)
  })

  it('none: a text reply, and the upstream is told none', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: ask('Use get_weather for Paris'),
      tools: [WEATHER],
      tool_choice: 'none',
    })
    expect(r.choices[0]!.message.tool_calls).toBeUndefined()
    expect(r.choices[0]!.message.content).toMatch(/\w+/)
    expect(r.choices[0]!.finish_reason).toBe('stop')
    expect(m.sims.atlasCheap.requests.at(-1)).toMatchObject({ tool_choice: 'none', tools: [WEATHER] })
  })

  it('required: a call although the message names no tool', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: ask('Say hello'),
      tools: [TIME, WEATHER],
      tool_choice: 'required',
    })
    expect(calls(r)).toEqual([['get_time', TIME_ARGS]])
    expect(r.choices[0]!.finish_reason).toBe('tool_calls')
  })

  it('named: only the named tool, even when the message mentions another', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: ask('Use get_weather please'),
      tools: [WEATHER, TIME],
      tool_choice: { type: 'function', function: { name: 'get_time' } },
    })
    expect(calls(r)).toEqual([['get_time', TIME_ARGS]])
  })

  it('also on the limited model, within its contract (auto, none)', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/tern@2',
      messages: ask('get_time?'),
      tools: [WEATHER, TIME],
      tool_choice: 'auto',
      parallel_tool_calls: false,
    })
    expect(calls(r)).toEqual([['get_time', TIME_ARGS]])
    expect(svcOf(r).provider).toBe(P.tern)
  })
})

describe('parallel tool calls', () => {
  it('several calls in one turn, in index order, with distinct ids', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: ask('Call get_weather and get_time'),
      tools: [WEATHER, TIME],
      parallel_tool_calls: true,
    })
    expect(calls(r)).toEqual([
      ['get_weather', WEATHER_ARGS],
      ['get_time', TIME_ARGS],
    ])
    const ids = functionCalls(r).map((c) => c.id)
    expect(new Set(ids).size).toBe(2)
    expect(r.usage!.completion_tokens).toBe(
      countOutput('', [
        { name: 'get_weather', arguments: WEATHER_ARGS },
        { name: 'get_time', arguments: TIME_ARGS },
      ]),
    )
  })

  it('parallel_tool_calls false: one call', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: ask('Call get_weather and get_time'),
      tools: [WEATHER, TIME],
      parallel_tool_calls: false,
    })
    expect(calls(r)).toEqual([['get_weather', WEATHER_ARGS]])
  })

  it('the SDK stream helper assembles the same calls from whole-call chunks, even from one-byte upstream deltas', async () => {
    m.sims.atlasCheap.settings.fragmentation = 'bytes'
    const stream = client.chat.completions.stream({
      model: 'svc/atlas@1',
      messages: ask('Call get_weather and get_time'),
      tools: [WEATHER, TIME],
    })
    const deltas: number[] = []
    stream.on(
      'chunk',
      (c) => void (c.choices[0]?.delta?.tool_calls && deltas.push(c.choices[0].delta.tool_calls.length)),
    )
    const r = await stream.finalChatCompletion()
    expect(calls(r)).toEqual([
      ['get_weather', WEATHER_ARGS],
      ['get_time', TIME_ARGS],
    ])
    expect(r.choices[0]!.finish_reason).toBe('tool_calls')
    expect(deltas).toEqual([1, 1])
  })
})

describe('a multi-turn agent loop feeding tool results back', () => {
  const run = (name: string, args: string) =>
    name === 'get_weather'
      ? JSON.stringify({ city: JSON.parse(args).city, temperature: 18 })
      : JSON.stringify({ time: '12:00' })

  it.each([false, true])(
    'runs to a final answer (stream %s), the history carrying assistant tool_calls and tool results',
    async (stream) => {
      const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: 'You are terse.' }]
      const finals: string[] = []
      for (const question of [
        'What is the weather? get_weather',
        'And the time? get_time',
        'Both again: get_weather, get_time',
      ]) {
        messages.push({ role: 'user', content: question })
        for (let step = 0; ; step++) {
          expect(step).toBeLessThan(3)
          const r = stream
            ? await client.chat.completions
                .stream({ model: 'svc/atlas@1', messages, tools: [WEATHER, TIME] })
                .finalChatCompletion()
            : await client.chat.completions.create({ model: 'svc/atlas@1', messages, tools: [WEATHER, TIME] })
          const msg = r.choices[0]!.message
          if (r.choices[0]!.finish_reason !== 'tool_calls') {
            finals.push(msg.content!)
            messages.push({ role: 'assistant', content: msg.content })
            break
          }
          messages.push({ role: 'assistant', content: msg.content, tool_calls: msg.tool_calls })
          for (const c of functionCalls(r))
            messages.push({ role: 'tool', tool_call_id: c.id, content: run(c.function.name, c.function.arguments) })
        }
      }
      expect(finals).toHaveLength(3)
      for (const f of finals) expect(f).toMatch(/^[A-Z]\w* /)
      // The upstream saw the whole history: 1 system + 3 × (user, assistant call, results…, assistant answer) minus the
      // last answer.
      const sent = m.sims.atlasCheap.requests.at(-1)!.messages as {
        role: string
        content: unknown
        tool_calls?: unknown[]
        tool_call_id?: string
      }[]
      expect(sent.map((x) => x.role)).toEqual([
        'system',
        'user',
        'assistant',
        'tool',
        'assistant',
        'user',
        'assistant',
        'tool',
        'assistant',
        'user',
        'assistant',
        'tool',
        'tool',
      ])
      expect(sent[2]).toMatchObject({
        role: 'assistant',
        content: null,
        tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: WEATHER_ARGS } }],
      })
      expect(sent[3]!.tool_call_id).toBe((sent[2]!.tool_calls![0] as { id: string }).id)
    },
  )

  it('the SDK tool runner drives the same loop to completion', async () => {
    const seen: string[] = []
    const runner = client.chat.completions.runTools({
      model: 'svc/atlas@1',
      messages: ask('What is the weather in Paris? get_weather'),
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: WEATHER.function.description,
            parameters: WEATHER.function.parameters,
            parse: JSON.parse,
            function: (args: { city: string }) => (seen.push(args.city), { temperature: 18 }),
          },
        },
      ],
    })
    const text = await runner.finalContent()
    expect(seen).toEqual(['Paris'])
    expect(text).toMatch(/^[A-Z]\w* /)
    expect((await runner.totalUsage()).completion_tokens).toBeGreaterThan(0)
  })
})

describe('structured outputs', () => {
  it('response_format json_schema on a model with structuredOutputs', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: ask('Give me a city'),
      response_format: {
        type: 'json_schema',
        json_schema: {
          name: 'city',
          strict: true,
          schema: {
            type: 'object',
            properties: { city: { type: 'string' } },
            required: ['city'],
            additionalProperties: false,
          },
        },
      },
    })
    expect(JSON.parse(r.choices[0]!.message.content!)).toEqual({ city: 'Paris' })
  })

  it('counts the response schema as input, like tool definitions', async () => {
    const plain = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: ask('Give me a city'),
      response_format: { type: 'json_object' },
    })
    const properties = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [
        `field_${i}`,
        { type: 'string', description: `the ${i}th field of the answer` },
      ]),
    )
    const schema = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: ask('Give me a city'),
      response_format: { type: 'json_schema', json_schema: { name: 'wide', schema: { type: 'object', properties } } },
    })
    expect(schema.usage!.prompt_tokens - plain.usage!.prompt_tokens).toBeGreaterThan(200)
  })
})
