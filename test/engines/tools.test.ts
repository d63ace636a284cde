import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EngineServer } from '../../src/engine/chat-server.js'
import { priceOf } from '../../src/money/usdc.js'
import { P, sseEvents, type Market } from '../helpers/market.js'
import { snapshot, TIME, WEATHER } from '../helpers/tools.js'
import { engineMarket, ENGINE_INSTALLED, modelFile, SENTENCE } from '../helpers/engine.js'

// Tool calls and response_format on a real engine: node-llama-cpp holds the generation to a grammar made from the
// schema, so a model that would only ever say its sentence (scripts/make-model.mjs) calls the tool it is told to, with
// arguments of the tool's schema, and answers JSON when JSON is asked for. Through the gateway and the openai SDK.

const PRICES = new Map([
  [P.atlasCheap, { input: 150_000n, output: 600_000n }],
  [P.atlasDear, { input: 200_000n, output: 800_000n }],
])
const ask = [{ role: 'user' as const, content: 'What is the weather in Paris?' }]
/** Where the grammar leaves the choice open, this model's tokens tie: sampling pinned, so the reply is one. */
const PINNED = { temperature: 0 }

describe.skipIf(!ENGINE_INSTALLED)('tool calls and JSON from node-llama-cpp through the gateway', () => {
  let engine: EngineServer
  let m: Market
  let client: OpenAI
  beforeAll(async () => {
    engine = await EngineServer.start({ modelFile: modelFile(), name: 'bigram', sequences: 2 })
    m = await engineMarket({ baseUrl: engine.url, upstreamModel: 'bigram', model: modelFile(), providers: 2 })
    client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
  }, 60_000)
  afterAll(async () => {
    await m?.close()
    await engine?.close()
  })

  /** The arguments of get_weather as the grammar lets this model write them: its sentence in each string it may. */
  const weatherArgs = (args: string) => {
    const parsed = JSON.parse(args) as { city: unknown; unit: unknown }
    expect(Object.keys(parsed)).toEqual(['city', 'unit'])
    expect(parsed.city).toBe(SENTENCE)
    expect(['celsius', 'fahrenheit']).toContain(parsed.unit)
  }

  it('a named tool_choice: that tool called, with arguments of its schema, charged in the model’s tokens', async () => {
    const before = await snapshot(m)
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      ...PINNED,
      messages: ask,
      tools: [TIME, WEATHER],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    })
    const choice = r.choices[0]!
    expect(choice.finish_reason).toBe('tool_calls')
    expect(choice.message.content).toBeNull()
    expect(choice.message.tool_calls).toHaveLength(1)
    const call = choice.message.tool_calls![0]!
    expect(call.type === 'function' && call.function.name).toBe('get_weather')
    if (call.type === 'function') weatherArgs(call.function.arguments)
    const [record] = await m.store.usage.list(m.accountId, { limit: 1 })
    // Charged for the call as delivered, in the model's tokens; the engine counts more, for the grammar spelled some
    // of it a character at a time.
    expect(record).toMatchObject({ outcome: 'completed', completionTokens: r.usage!.completion_tokens })
    expect(record!.upstreamCompletionTokens).toBeGreaterThanOrEqual(r.usage!.completion_tokens)
    expect(record!.cost).toBe(
      priceOf(PRICES.get(record!.provider)!, r.usage!.prompt_tokens, r.usage!.completion_tokens),
    )
    expect((await snapshot(m)).balance).toBe(before.balance - record!.cost)
  })

  it('streams a named call: the engine writes its arguments in fragments, the gateway delivers it whole', async () => {
    const res = await fetch(`${engine.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'bigram',
        ...PINNED,
        messages: ask,
        tools: [WEATHER],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        stream: true,
      }),
    })
    const pieces = (await sseEvents(res))
      .filter((e) => e !== '[DONE]')
      .flatMap(
        (e) =>
          (JSON.parse(e) as { choices: { delta: { tool_calls?: { function: { arguments?: string } }[] } }[] }).choices,
      )
      .flatMap((c) => c.delta.tool_calls ?? [])
      .map((t) => t.function.arguments ?? '')
      .filter(Boolean)
    expect(pieces.length).toBeGreaterThan(5)
    weatherArgs(pieces.join(''))

    const stream = await client.chat.completions.create({
      model: 'svc/atlas@1',
      ...PINNED,
      messages: ask,
      tools: [WEATHER],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      stream: true,
    })
    const fragments: string[] = []
    const names: string[] = []
    let finish: string | null = null
    for await (const c of stream) {
      for (const t of c.choices[0]?.delta.tool_calls ?? []) {
        if (t.function?.name) names.push(t.function.name)
        if (t.function?.arguments) fragments.push(t.function.arguments)
      }
      finish ??= c.choices[0]?.finish_reason ?? null
    }
    expect(names).toEqual(['get_weather'])
    expect(fragments).toEqual([pieces.join('')])
    expect(finish).toBe('tool_calls')
  })

  it('tool_choice required among two tools: one call of one of them, whole', async () => {
    for (const stream of [false, true]) {
      const body = {
        model: 'svc/atlas@1',
        ...PINNED,
        messages: ask,
        tools: [WEATHER, TIME],
        tool_choice: 'required' as const,
      }
      let name = ''
      let args = ''
      if (stream) {
        for await (const c of await client.chat.completions.create({ ...body, stream: true }))
          for (const t of c.choices[0]?.delta.tool_calls ?? []) {
            name += t.function?.name ?? ''
            args += t.function?.arguments ?? ''
          }
      } else {
        const call = (await client.chat.completions.create(body)).choices[0]!.message.tool_calls![0]!
        if (call.type === 'function') [name, args] = [call.function.name, call.function.arguments]
      }
      expect(['get_weather', 'get_time']).toContain(name)
      if (name === 'get_weather') weatherArgs(args)
      else expect(JSON.parse(args)).toEqual({ timezone: SENTENCE })
    }
  })

  it('tool_choice auto: the model chooses, and this one answers in words', async () => {
    const r = await client.chat.completions.create({ model: 'svc/atlas@1', ...PINNED, messages: ask, tools: [WEATHER] })
    expect(r.choices[0]).toMatchObject({ message: { content: SENTENCE }, finish_reason: 'stop' })
    expect(r.choices[0]!.message.tool_calls ?? []).toEqual([])
  })

  it('goes on after a tool’s result: the call and its result are the model’s history', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: [
        ...ask,
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: '{"temperature":18}' },
      ],
      tools: [WEATHER],
    })
    expect(r.choices[0]!.message.content).toBe(SENTENCE)
    const [record] = await m.store.usage.list(m.accountId, { limit: 1 })
    // The call and its result were in the prompt the engine read.
    expect(record!.upstreamPromptTokens).toBeGreaterThan(40)
  })

  it('response_format json_schema and json_object: JSON of the schema, or of any shape', async () => {
    const schema = {
      type: 'object',
      properties: { title: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } } },
      required: ['title', 'tags'],
      additionalProperties: false,
    }
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      ...PINNED,
      messages: ask,
      response_format: { type: 'json_schema', json_schema: { name: 'note', schema, strict: true } },
    })
    const note = JSON.parse(r.choices[0]!.message.content!) as { title: string; tags: string[] }
    expect(note.title).toBe(SENTENCE)
    expect(Array.isArray(note.tags)).toBe(true)
    const any = await client.chat.completions.create({
      model: 'svc/atlas@1',
      ...PINNED,
      messages: ask,
      response_format: { type: 'json_object' },
    })
    expect(() => JSON.parse(any.choices[0]!.message.content!)).not.toThrow()
  })

  it('the engine refuses, as a bad request, a tool choice it cannot keep', async () => {
    const post = (body: unknown) =>
      fetch(`${engine.url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'bigram', messages: ask, ...(body as object) }),
      })
    const unknown = await post({ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } })
    expect(unknown.status).toBe(400)
    expect(((await unknown.json()) as { error: { message: string } }).error.message).toMatch(/nope.*not a tool/)
    const unanswered = await post({
      messages: [
        ...ask,
        { role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'x', arguments: '{}' } }] },
        { role: 'user', content: 'well?' },
      ],
    })
    expect(unanswered.status).toBe(400)
  })
})
