import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import { chat, startMarket, type Market } from './helpers/market.js'
import { snapshot, expectUnchanged, TIME, upstreamRequests, WEATHER } from './helpers/tools.js'

let m: Market
beforeAll(async () => {
  m = await startMarket()
})
afterAll(() => m?.close())

const ask = [{ role: 'user', content: 'get_weather for Paris' }]
const strict = { ...WEATHER, function: { ...WEATHER.function, strict: true } }
const call = {
  id: 'call_1',
  type: 'function',
  function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
}
const history = [
  ...ask,
  { role: 'assistant', content: null, tool_calls: [call] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"temperature":18}' },
]
const jsonSchema = (strictFlag: boolean) => ({
  type: 'json_schema',
  json_schema: { name: 'x', strict: strictFlag, schema: { type: 'object', properties: {} } },
})

// [what, body, param]: every request outside a model's capabilities or tool_contract, refused before any work or
// charge.
const refusals: [string, Record<string, unknown>, string][] = [
  ['tools on a model without tools', { model: 'svc/wren@1', tools: [WEATHER] }, 'tools'],
  ['tool history on a model without tools', { model: 'svc/wren@1', messages: history }, 'messages'],
  [
    'tool_choice required outside the contract',
    { model: 'svc/tern@2', tools: [WEATHER], tool_choice: 'required' },
    'tool_choice',
  ],
  [
    'a named tool_choice outside the contract',
    { model: 'svc/tern@2', tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'get_weather' } } },
    'tool_choice',
  ],
  [
    'a named tool_choice of an undeclared tool',
    { model: 'svc/atlas@1', tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'get_time' } } },
    'tool_choice',
  ],
  ['tool_choice without tools', { model: 'svc/atlas@1', tool_choice: 'required' }, 'tool_choice'],
  [
    'parallel_tool_calls where not certified',
    { model: 'svc/tern@2', tools: [WEATHER, TIME], parallel_tool_calls: true },
    'parallel_tool_calls',
  ],
  ['parallel_tool_calls without tools', { model: 'svc/atlas@1', parallel_tool_calls: true }, 'parallel_tool_calls'],
  ['strict where strict_schemas is false', { model: 'svc/tern@2', tools: [TIME, strict] }, 'tools[1].function.strict'],
  ['a tool declared twice', { model: 'svc/atlas@1', tools: [WEATHER, WEATHER] }, 'tools[1].function.name'],
  [
    'a tool name outside the pattern',
    { model: 'svc/atlas@1', tools: [{ type: 'function', function: { name: 'get weather' } }] },
    'tools[0].function.name',
  ],
  [
    'response_format json_object without structuredOutputs',
    { model: 'svc/wren@1', response_format: { type: 'json_object' } },
    'response_format',
  ],
  [
    'a strict json_schema where strict_schemas is false',
    { model: 'svc/tern@2', response_format: jsonSchema(true) },
    'response_format',
  ],
  [
    'a tool message without tool_call_id',
    { model: 'svc/atlas@1', messages: [...ask, { role: 'tool', content: '{}' }] },
    'messages[1].tool_call_id',
  ],
  [
    'an assistant message without content or tool_calls',
    { model: 'svc/atlas@1', messages: [...ask, { role: 'assistant', content: null }] },
    'messages[1].content',
  ],
  [
    'tool_calls on a user message',
    { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'x', tool_calls: [call] }] },
    'messages[0].tool_calls',
  ],
  // Malformed on any model: svc/cortex@1 refuses them too, rather than routing them past every candidate to the vendor.
  [
    'on cortex, a named tool_choice of an undeclared tool',
    { model: 'svc/cortex@1', tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'get_time' } } },
    'tool_choice',
  ],
  ['on cortex, tool_choice without tools', { model: 'svc/cortex@1', tool_choice: 'auto' }, 'tool_choice'],
  [
    'on cortex, parallel_tool_calls without tools',
    { model: 'svc/cortex@1', parallel_tool_calls: true },
    'parallel_tool_calls',
  ],
  ['on cortex, a tool declared twice', { model: 'svc/cortex@1', tools: [WEATHER, WEATHER] }, 'tools[1].function.name'],
]

describe('contract enforcement before any work or charge', () => {
  it.each(refusals)('refuses %s with 400 feature_not_supported naming the field', async (_what, extra, param) => {
    const before = await snapshot(m)
    const upstream = upstreamRequests(m)
    for (const stream of [false, true]) {
      const res = await chat(m.url, m.key, { messages: ask, max_tokens: 50, stream, ...extra })
      const text = await res.text()
      expect(res.status, text).toBe(400)
      const { error } = JSON.parse(text)
      expect(error).toMatchObject({ type: 'invalid_request_error', code: 'feature_not_supported', param })
      expect(error.message.length).toBeGreaterThan(20)
    }
    expect(upstreamRequests(m)).toBe(upstream)
    await expectUnchanged(m, before)
  })

  it('says what the contract allows', async () => {
    const res = await chat(m.url, m.key, {
      model: 'svc/tern@2',
      messages: ask,
      tools: [WEATHER],
      tool_choice: 'required',
    })
    expect((await res.json()).error.message).toBe(
      'svc/tern@2 is certified for tool_choice auto and none; "required" is outside its tool_contract.',
    )
  })

  it('reaches openai SDK users as a typed 400 with code and param', async () => {
    const before = await snapshot(m)
    const client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
    await expect(
      client.chat.completions.create({
        model: 'svc/tern@2',
        messages: [{ role: 'user', content: 'hi' }],
        tools: [WEATHER],
        parallel_tool_calls: true,
      }),
    ).rejects.toMatchObject({ status: 400, code: 'feature_not_supported', param: 'parallel_tool_calls' })
    await expectUnchanged(m, before)
  })

  it('accepts what the contract allows: tool history, none and auto on the limited model, non-strict json_schema', async () => {
    for (const extra of [
      { model: 'svc/atlas@1', messages: history, tools: [WEATHER] },
      { model: 'svc/tern@2', tools: [WEATHER], tool_choice: 'none' },
      { model: 'svc/tern@2', tools: [WEATHER, TIME], tool_choice: 'auto', parallel_tool_calls: false },
      { model: 'svc/tern@2', response_format: jsonSchema(false) },
      { model: 'svc/wren@1', tool_choice: 'none' },
      // null means absent, as for every other optional field; on cortex too.
      { model: 'svc/wren@1', tools: null, tool_choice: null },
      { model: 'svc/cortex@1', tools: null, tool_choice: null, parallel_tool_calls: null },
    ]) {
      const res = await chat(m.url, m.key, { messages: ask, max_tokens: 50, ...extra })
      expect(res.status, JSON.stringify(extra)).toBe(200)
    }
  })
})
