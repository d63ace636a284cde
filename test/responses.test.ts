import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import type { Response, ResponseFunctionToolCall, ResponseStreamEvent } from 'openai/resources/responses/responses'
import { P, startMarket, type Market } from './helpers/market.js'
import { resetSims, WEATHER, WEATHER_ARGS } from './helpers/tools.js'

let m: Market
let client: OpenAI
beforeAll(async () => {
  m = await startMarket()
  client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
})
afterAll(() => m?.close())
beforeEach(() => resetSims(m))

/** The Responses shape of the chat test tool. */
const weather = { type: 'function' as const, strict: false, ...WEATHER.function }
const svcOf = (r: unknown) => (r as { svc: { cost_usdc: string; provider: string; request_id: string } }).svc
const calls = (r: Response) => r.output.filter((o): o is ResponseFunctionToolCall => o.type === 'function_call')

describe('POST /v1/responses through the openai SDK', () => {
  it('answers a string input with a response object: a message of output_text, usage and svc', async () => {
    const r = await client.responses.create({ model: 'svc/atlas@1', input: 'Say hello', max_output_tokens: 50 })
    expect(r).toMatchObject({ object: 'response', status: 'completed', model: 'svc/atlas@1' })
    expect(r.id).toMatch(/^resp_/)
    expect(r.output).toHaveLength(1)
    expect(r.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed' })
    expect(r.output_text).toMatch(/\w+/)
    expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + r.usage!.output_tokens)
    expect(r.usage!.output_tokens).toBeGreaterThan(0)
    expect(svcOf(r).provider).toBe(P.atlasCheap)
    expect(svcOf(r).request_id).toBe(`req_${r.id.slice(5)}`)
    expect(Number(svcOf(r).cost_usdc)).toBeGreaterThan(0)
    // Served upstream as a chat request: instructions become its system message.
    const withInstructions = await client.responses.create({
      model: 'svc/atlas@1',
      instructions: 'Be brief.',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'Say hello' }] }],
    })
    expect(withInstructions.status).toBe('completed')
    expect(m.sims.atlasCheap.requests.at(-1)).toMatchObject({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello' },
      ],
    })
  })

  it('streams the Responses events in order, each numbered, and the final response carries usage and svc', async () => {
    const stream = client.responses.stream({ model: 'svc/atlas@1', input: 'Tell me a story' })
    const events: ResponseStreamEvent[] = []
    for await (const e of stream) events.push(e)
    const final = await stream.finalResponse()
    const types = [...new Set(events.map((e) => e.type))]
    expect(types).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ])
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i))
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []))
    expect(deltas.length).toBeGreaterThan(1)
    expect(final.output_text).toBe(deltas.join(''))
    expect(final.status).toBe('completed')
    expect(final.usage!.output_tokens).toBeGreaterThan(0)
    expect(svcOf(final).provider).toBe(P.atlasCheap)
  })

  it('a function tool round trip through function_call_output', async () => {
    const first = await client.responses.create({
      model: 'svc/atlas@1',
      input: [{ role: 'user', content: 'Use get_weather for Paris' }],
      tools: [weather],
      store: false,
    })
    const [call] = calls(first)
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: WEATHER_ARGS })
    expect(call!.call_id).toMatch(/^call_/)
    expect(first.output.some((o) => o.type === 'message')).toBe(false)
    const second = await client.responses.create({
      model: 'svc/atlas@1',
      input: [
        { role: 'user', content: 'Use get_weather for Paris' },
        { type: 'function_call', call_id: call!.call_id, name: call!.name, arguments: call!.arguments },
        { type: 'function_call_output', call_id: call!.call_id, output: '{"temperature":21}' },
      ],
      tools: [weather],
      store: false,
    })
    expect(second.output_text).toMatch(/\w+/)
    expect(m.sims.atlasCheap.requests.at(-1)!.messages).toEqual([
      { role: 'user', content: 'Use get_weather for Paris' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: call!.call_id, type: 'function', function: { name: 'get_weather', arguments: WEATHER_ARGS } },
        ],
      },
      { role: 'tool', tool_call_id: call!.call_id, content: '{"temperature":21}' },
    ])
  })

  it('a function tool round trip through previous_response_id, streamed: the call delivered whole', async () => {
    const stream = client.responses.stream({
      model: 'svc/atlas@1',
      input: 'Use get_weather for Paris',
      tools: [weather],
    })
    const types: string[] = []
    for await (const e of stream) types.push(e.type)
    const first = await stream.finalResponse()
    expect(types.filter((t) => t.startsWith('response.function_call_arguments'))).toEqual([
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
    ])
    const [call] = calls(first)
    expect(call!.arguments).toBe(WEATHER_ARGS)
    const second = await client.responses.create({
      model: 'svc/atlas@1',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call!.call_id, output: 'sunny' }],
      tools: [weather],
    })
    expect(second.previous_response_id).toBe(first.id)
    expect(second.output_text).toMatch(/\w+/)
    const sent = m.sims.atlasCheap.requests.at(-1)!.messages as { role: string }[]
    expect(sent.map((x) => x.role)).toEqual(['user', 'assistant', 'tool'])
    // And the conversation goes on from the second.
    const third = await client.responses.create({ model: 'svc/atlas@1', previous_response_id: second.id, input: 'ok' })
    const roles = (m.sims.atlasCheap.requests.at(-1)!.messages as { role: string }[]).map((x) => x.role)
    expect(third.status).toBe('completed')
    expect(roles).toEqual(['user', 'assistant', 'tool', 'assistant', 'user'])
  })
})

describe('what the Responses API refuses', () => {
  const refusal = (p: Promise<unknown>) => p.then(() => expect.unreachable('accepted')).catch((e) => e)

  it('a reference to nothing kept, naming its field (an unknown id, or a response sent with store: false)', async () => {
    const unknown = await refusal(
      client.responses.create({ model: 'svc/atlas@1', input: 'hi', previous_response_id: 'resp_nothing' }),
    )
    expect(unknown).toMatchObject({ status: 400, code: 'feature_not_supported', param: 'previous_response_id' })
    expect(unknown.message).toContain('kept for 24 hours')
    const unstored = await client.responses.create({ model: 'svc/atlas@1', input: 'hi', store: false })
    const ref = await refusal(
      client.responses.create({
        model: 'svc/atlas@1',
        input: [
          { role: 'user', content: 'hi' },
          { type: 'item_reference', id: unstored.output[0]!.id! },
        ],
      }),
    )
    expect(ref).toMatchObject({ status: 400, code: 'feature_not_supported', param: 'input[1].id' })
    expect(ref.headers.get('x-request-id')).toMatch(/^req_/)
  })

  it('metadata as chat completions bound it, naming the field', async () => {
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']))
    const err = await refusal(client.responses.create({ model: 'svc/atlas@1', input: 'hi', metadata: many }))
    expect(err).toMatchObject({ status: 400, code: 'feature_not_supported', param: 'metadata' })
  })

  it("references past one statement's reach are all resolved", async () => {
    const kept = await client.responses.create({ model: 'svc/atlas@1', input: 'hi', max_output_tokens: 3 })
    const ref = { type: 'item_reference' as const, id: kept.output[0]!.id! }
    const r = await client.responses.create({
      model: 'svc/atlas@1',
      input: [...Array.from({ length: 600 }, () => ref), { role: 'user', content: 'and?' }],
      max_output_tokens: 3,
    })
    expect(r.status).toBe('incomplete')
    const sent = m.sims.atlasCheap.requests.at(-1)!.messages as { role: string; content: string }[]
    expect(sent).toHaveLength(601)
    expect(sent[599]).toEqual({ role: 'assistant', content: kept.output_text })
  })

  it('kept items are per key: another key of the same account cannot read them', async () => {
    const kept = await client.responses.create({ model: 'svc/atlas@1', input: 'hi' })
    const { issueKey } = await import('../src/accounts/operations.js')
    const { key } = await issueKey({ now: Date.now(), store: m.store, accountId: m.accountId, name: 'other' })
    const other = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: key, maxRetries: 0 })
    const err = await refusal(
      other.responses.create({ model: 'svc/atlas@1', input: 'hi', previous_response_id: kept.id }),
    )
    expect(err).toMatchObject({ status: 400, param: 'previous_response_id' })
  })

  it('a tool other than a function, with feature_not_supported naming it', async () => {
    const err = await refusal(
      client.responses.create({ model: 'svc/atlas@1', input: 'hi', tools: [weather, { type: 'web_search' }] }),
    )
    expect(err).toMatchObject({ status: 400, code: 'feature_not_supported', param: 'tools[1].type' })
    expect(err.error).toMatchObject({ type: 'invalid_request_error', code: 'feature_not_supported' })
  })

  it('what chat completions refuse, with the same code and status, naming the Responses field', async () => {
    const model = await refusal(client.responses.create({ model: 'svc/nope@1', input: 'hi' }))
    expect(model).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' })
    const named = await refusal(
      client.responses.create({
        model: 'svc/tern@2',
        input: 'hi',
        tools: [weather],
        tool_choice: { type: 'function', name: 'get_weather' },
      }),
    )
    expect(named).toMatchObject({ status: 400, code: 'feature_not_supported', param: 'tool_choice' })
    const long = await refusal(
      client.responses.create({ model: 'svc/wren@1', input: 'hi', max_output_tokens: 100_000 }),
    )
    expect(long).toMatchObject({ status: 400, param: 'max_output_tokens' })
    const image = await refusal(
      client.responses.create({
        model: 'svc/atlas@1',
        input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png', detail: 'auto' }] }],
      }),
    )
    expect(image).toMatchObject({ status: 400, param: 'input[0].content[0]' })
    const bad = await fetch(`${m.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${m.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc/atlas@1' }),
    })
    expect(bad.status).toBe(400)
    expect((await bad.json()).error).toMatchObject({ code: 'feature_not_supported', param: 'input' })
    const nokey = await fetch(`${m.url}/v1/responses`, { method: 'POST', body: '{}' })
    expect(nokey.status).toBe(401)
  })
})
