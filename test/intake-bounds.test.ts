import { describe, expect, it } from 'vitest'
import { chat, marketPerTest } from './helpers/market.js'
import { validateChatRequest } from '../src/gateway/validate.js'
import { isApiError } from '../src/protocol/errors.js'

const market = marketPerTest()
const ask = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 }
const head = JSON.stringify(ask).slice(0, -1)
/** Room for a body's JSON under the 4 MiB the gateway takes. */
const ROOM = 4 * 1024 * 1024 - 4096

/** `${before}${unit},${unit},…${after}` as long as ROOM allows. */
const filled = (before: string, unit: string, after: string) =>
  `${before}${Array(Math.floor((ROOM - before.length - after.length) / (unit.length + 1)))
    .fill(unit)
    .join(',')}${after}`

/** A JSON object of `n` keys `k0`…, each holding `value`. */
const keyed = (n: number, value: string) => `{${Array.from({ length: n }, (_, i) => `"k${i}":${value}`).join(',')}}`

/**
 * A real tool's schema: `n` string properties of one type, a description and an enum of three each (7 values apiece).
 */
const schemaOf = (n: number) => ({
  type: 'object',
  properties: Object.fromEntries(
    Array.from({ length: n }, (_, j) => [
      `p${j}`,
      { type: 'string', description: `field ${j}`, enum: ['a', 'b', 'c'] },
    ]),
  ),
  required: ['p0'],
})

describe('request intake, bounded', () => {
  it('refuses tools and a response schema that hold more values than any real one, naming where the count ran out', async () => {
    const mk = await market()
    const tool = (parameters: string, i = 0) =>
      `{"type":"function","function":{"name":"t${i}","parameters":${parameters}}}`
    // 50,000 values a tool: each far from the bound, together past it.
    const tools = Array.from({ length: 20 }, (_, i) => tool(`{"a":[${Array(50_000).fill('0').join(',')}]}`, i))
    for (const [body, param] of [
      // Walked whole, these held the event loop for 1.5 to 2.9 s each, then were counted and sent on.
      [
        filled(`${head},"tools":[{"type":"function","function":{"name":"w","parameters":{"a":[`, '0', ']}}}]}'),
        'tools[0].function.parameters',
      ],
      [
        filled(`${head},"tools":[{"type":"function","function":{"name":"w","parameters":{"a":[`, '{}', ']}}}]}'),
        'tools[0].function.parameters',
      ],
      [
        filled(
          `${head},"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"a":[`,
          '0',
          ']}}}}',
        ),
        'response_format.json_schema.schema',
      ],
      [`${head},"tools":[${tool(keyed(320_000, '0'))}]}`, 'tools[0].function.parameters'],
      [`${head},"tools":[${tools.join(',')}]}`, 'tools[3].function.parameters'],
      // Around a tool's parameters as well as in them.
      [filled(`${head},"tools":[{"type":"function","function":{"name":"w"},"extra":[`, '0', ']}]}'), 'tools[0]'],
    ] as const) {
      expect(body.length).toBeLessThan(4 * 1024 * 1024)
      const res = await chat(mk.url, mk.key, body)
      expect(res.status).toBe(400)
      const { error } = await res.json()
      expect(error).toMatchObject({ code: 'feature_not_supported', param })
      expect(error.message).toMatch(
        /^Invalid value for \S+: the request's tools and response format hold more than \d+ values\.$/,
      )
    }
  })

  it('takes as many values as the largest real tools hold', async () => {
    const mk = await market()
    const weather = { type: 'function', function: { name: 'weather', parameters: schemaOf(40) } }
    const res = await chat(mk.url, mk.key, {
      ...ask,
      tools: [weather],
      response_format: { type: 'json_schema', json_schema: { name: 's', schema: schemaOf(40) } },
    })
    expect(res.status, await res.clone().text()).toBe(200)
    // 128 tools (OpenAI's most) of 150 properties each: over 130,000 values, far more than a context holds, within the
    // bound.
    const many = Array.from({ length: 128 }, (_, i) => ({
      type: 'function',
      function: { name: `t${i}`, parameters: schemaOf(150) },
    }))
    expect(isApiError(validateChatRequest({ ...ask, tools: many }))).toBe(false)
  })

  it("names the first wrong message of a long history, in the schema's order with the other fields", () => {
    const history = (n: number, wrong: Record<number, unknown>) =>
      Array.from({ length: n }, (_, i) => wrong[i] ?? { role: i % 2 ? 'assistant' : 'user', content: `turn ${i}` })
    const refused = (body: unknown) => {
      const r = validateChatRequest(body)
      return isApiError(r) ? r.param : 'accepted'
    }
    expect(
      refused({
        ...ask,
        messages: history(1_000, { 700: { role: 'user', content: 5 }, 900: { role: 'nobody', content: 'x' } }),
      }),
    ).toBe('messages[700].content')
    expect(refused({ ...ask, messages: history(1_000, { 0: { role: 'user', content: 7 } }) })).toBe(
      'messages[0].content',
    )
    expect(refused({ ...ask, messages: history(1_000, { 999: { role: 'user', content: 'x', name: 5 } }) })).toBe(
      'messages[999].name',
    )
    const calls = Array.from({ length: 129 }, (_, i) => ({
      id: `c${i}`,
      type: 'function',
      function: { name: 'f', arguments: '{}' },
    }))
    expect(
      refused({ ...ask, messages: history(1_000, { 501: { role: 'assistant', content: null, tool_calls: calls } }) }),
    ).toBe('messages[501].tool_calls')
    // In the schema's order, as for a short history: the model before the messages, the messages before the rest.
    expect(refused({ ...ask, model: 5, messages: history(1_000, { 10: { role: 'user', content: 5 } }) })).toBe('model')
    expect(
      refused({ ...ask, temperature: 'hot', messages: history(1_000, { 10: { role: 'user', content: 5 } }) }),
    ).toBe('messages[10].content')
    expect(refused({ ...ask, temperature: 'hot', messages: history(1_000, {}) })).toBe('temperature')
    expect(refused({ ...ask, messages: history(1_000, {}) })).toBe('accepted')
  })

  it('takes OpenAI’s most of 128 tools, and refuses more', async () => {
    const mk = await market()
    const tools = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        type: 'function',
        function: { name: `t${i}`, parameters: { type: 'object' } },
      }))
    const most = await chat(mk.url, mk.key, { ...ask, tools: tools(128) })
    expect(most.status, await most.clone().text()).toBe(200)
    const more = await chat(mk.url, mk.key, { ...ask, tools: tools(129) })
    expect(more.status).toBe(400)
    expect((await more.json()).error).toMatchObject({
      code: 'feature_not_supported',
      param: 'tools',
      message: 'Invalid value for tools: expected array length to be less or equal to 128.',
    })
  })

  it('takes OpenAI’s most of 128 tool calls in an assistant message of the history, and refuses more', async () => {
    const mk = await market()
    const withCalls = (n: number) => {
      const calls = Array.from({ length: n }, (_, i) => ({
        id: `call_${i}`,
        type: 'function',
        function: { name: 'weather', arguments: '{}' },
      }))
      return {
        ...ask,
        tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }],
        messages: [
          { role: 'user', content: 'weather everywhere?' },
          { role: 'assistant', content: null, tool_calls: calls },
          ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: 'sunny' })),
        ],
      }
    }
    const most = await chat(mk.url, mk.key, withCalls(128))
    expect(most.status, await most.clone().text()).toBe(200)
    const more = await chat(mk.url, mk.key, withCalls(129))
    expect(more.status).toBe(400)
    expect((await more.json()).error).toMatchObject({
      code: 'feature_not_supported',
      param: 'messages[1].tool_calls',
      message: 'Invalid value for messages[1].tool_calls: expected array length to be less or equal to 128.',
    })
  })

  it('checks a logit_bias of many entries as one of a few, and sends it on whole', async () => {
    const mk = await market()
    const bias = (n: number, wrong: Record<string, unknown> = {}) => ({
      ...Object.fromEntries(Array.from({ length: n }, (_, i) => [String(i), (i % 201) - 100])),
      ...wrong,
    })
    const many = bias(5_000)
    const ok = await chat(mk.url, mk.key, { ...ask, logit_bias: many })
    expect(ok.status, await ok.clone().text()).toBe(200)
    expect(mk.sims.atlasCheap.requests.at(-1)!.logit_bias).toEqual(many)
    // The same refusal, word for word, as for a map of a few entries with the same wrong one.
    for (const wrong of [{ 4000: 100.5 }, { 9000: '1' }, { token: 1 }, { 12345678: 0 }, { x: 1, '0007': 500 }]) {
      const errorOf = async (n: number) =>
        (await (await chat(mk.url, mk.key, { ...ask, logit_bias: bias(n, wrong) })).json()).error
      const few = await errorOf(3)
      expect(few).toMatchObject({ code: 'feature_not_supported' })
      expect(await errorOf(5_000)).toEqual(few)
    }
  })

  it('refuses metadata of more than the 16 pairs OpenAI takes, before reading them', async () => {
    const mk = await market()
    const pairs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']))
    const ok = await chat(mk.url, mk.key, { ...ask, metadata: pairs(16) })
    expect(ok.status, await ok.clone().text()).toBe(200)
    expect(mk.sims.atlasCheap.requests.at(-1)!.metadata).toEqual(pairs(16))
    for (const body of [{ ...ask, metadata: pairs(17) }, `${head},"metadata":${keyed(300_000, '""')}}`]) {
      const res = await chat(mk.url, mk.key, body)
      expect(res.status).toBe(400)
      const { error } = await res.json()
      expect(error).toMatchObject({ code: 'feature_not_supported', param: 'metadata' })
      expect(error.message).toMatch(/^Invalid value for metadata: at most 16 key-value pairs, not \d+\.$/)
    }
  })

  it('repeats no more than the start of a long name or key in an error', async () => {
    const mk = await market()
    const long = 'x'.repeat(1_000_000)
    // What an error shows of a long string (a path in which one stands included): its first 64 code units.
    const shown = (s: string) => `${s.slice(0, 64)}…`
    const named = { type: 'function', function: { name: long } }
    const weather = { type: 'function', function: { name: 'weather' } }
    // Each with the start of the long string the message shows, where it shows one.
    for (const [extra, param, shows] of [
      [{ logit_bias: { [long]: 1 } }, shown(`logit_bias.${long}`), shown(`logit_bias.${long}`)],
      [{ metadata: { [long]: 1 } }, shown(`metadata.${long}`), shown(`metadata.${long}`)],
      [{ tool_choice: named }, 'tool_choice', `"${shown(long)}"`],
      [{ tool_choice: named, tools: [weather] }, 'tool_choice', `"${shown(long)}"`],
      // Fields of its own a client adds to a tool_choice are not shown at all.
      [
        { tool_choice: { type: 'function', function: { name: 'weather' }, extra: long } },
        'tool_choice',
        '{"type":"function","function":{"name":"weather"}}',
      ],
      [{ messages: [{ role: 'user', content: [{ type: long }] }] }, 'messages[0].content', `"${shown(long)}"`],
    ] as const) {
      const res = await chat(mk.url, mk.key, { ...ask, ...extra })
      expect(res.status).toBe(400)
      const { error } = await res.json()
      expect(error).toMatchObject({ code: 'feature_not_supported', param })
      expect(error.message.length, error.message.slice(0, 200)).toBeLessThan(200)
      expect(error.message).toContain(shows)
    }
    const unknown = await chat(mk.url, mk.key, { ...ask, model: long })
    expect(unknown.status).toBe(404)
    const { error } = await unknown.json()
    expect(error).toMatchObject({ code: 'model_not_found', param: 'model' })
    expect(error.message.length).toBeLessThan(200)
  })
})
