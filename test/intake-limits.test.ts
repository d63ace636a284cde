import { describe, expect, it } from 'vitest'
import { chat, marketPerTest } from './helpers/market.js'
import { countText } from '../src/metering/o200k.js'
import { COUNT_TURN_UNITS, PER_MESSAGE_OVERHEAD, REPLY_PRIMING } from '../src/metering/tokens.js'
import { countedByTurn } from './helpers/turns.js'

const market = marketPerTest()
const ask = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 }

/** A history in which the assistant called a tool with id `id` and the tool answered it. */
const withCall = (id: string, extra: Record<string, unknown> = {}) => ({
  ...ask,
  messages: [
    { role: 'user', content: 'weather?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name: 'weather', arguments: '{}' }, ...extra }],
    },
    { role: 'tool', tool_call_id: id, content: 'sunny' },
  ],
})

describe('request intake', () => {
  it('refuses a prompt far past every context window without counting all of it', async () => {
    const mk = await market()
    // 3.5 MB of letters without a space: about 2 million tokens, seconds to count whole.
    let x = 7
    const letters = Array.from({ length: 3_500_000 }, () =>
      String.fromCharCode(97 + ((x = (x * 1103515245 + 12345) >>> 0) % 26)),
    ).join('')
    const { result: res, perTurn } = await countedByTurn(() =>
      chat(mk.url, mk.key, { ...ask, messages: [{ role: 'user', content: letters }] }),
    )
    expect(res.status).toBe(400)
    const { error } = await res.json()
    expect(error).toMatchObject({ code: 'feature_not_supported', param: 'messages' })
    expect(error.message).toContain('longer than the context window of svc/atlas@1 (32768 tokens)')
    // Counted, not timed: 32,768 tokens of such letters are about 65,000 of the 3,500,000 characters.
    expect(perTurn.reduce((a, b) => a + b, 0)).toBeLessThan(200_000)
  })

  it('counts a long prompt for the vendor in steps, serving other work between them, to the count of one pass', async () => {
    const mk = await market()
    // 1 MB of letters at random, about half a million tokens: too long for every candidate, and the vendor's context is
    // not given, so it is counted whole. Counted at once it held the event loop for most of a second.
    let x = 11
    const letters = Array.from({ length: 1_000_000 }, () =>
      String.fromCharCode(97 + (((x = (x * 1103515245 + 12345) >>> 0) >>> 16) % 26)),
    ).join('')
    const { result: res, perTurn } = await countedByTurn(() =>
      chat(mk.url, mk.key, { ...ask, model: 'svc/cortex@1', messages: [{ role: 'user', content: letters }] }),
    )
    expect(res.status, await res.clone().text()).toBe(200)
    const reply = await res.json()
    expect(reply.svc.routing).toMatchObject({ vendor_fallback: true, status: 'managed:no_candidate' })
    expect(reply.usage.prompt_tokens).toBe(REPLY_PRIMING + PER_MESSAGE_OVERHEAD + countText(letters))
    // Counted over many turns, other work run between them, none counting more than COUNT_TURN_UNITS and a piece.
    expect(perTurn.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(letters.length)
    expect(perTurn.length).toBeGreaterThanOrEqual(Math.ceil(letters.length / (COUNT_TURN_UNITS + 1024)))
    expect(Math.max(...perTurn)).toBeLessThanOrEqual(COUNT_TURN_UNITS + 1024)
  })

  it('counts the ids of tool calls as input, and sends the calls on as the fields it checked', async () => {
    const mk = await market()
    const usage = async (body: unknown) => {
      const res = await chat(mk.url, mk.key, body)
      expect(res.status).toBe(200)
      return (await res.json()).usage.prompt_tokens as number
    }
    const short = await usage(withCall('call_1'))
    const long = await usage(withCall(`call_${'lorem ipsum '.repeat(200)}`))
    // The id stands twice in the history: on the call and on the tool's answer.
    expect(long - short).toBeGreaterThan(2 * 300)
    // What is not sent on is not counted either: a schema's extras, beside the ones of a call.
    const format = (extra: Record<string, unknown>) => ({
      ...ask,
      response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'object' }, ...extra } },
    })
    const plainFormat = await usage(format({}))
    expect(await usage(format({ smuggled: 'lorem ipsum '.repeat(200) }))).toBe(plainFormat)
    expect(mk.sims.atlasCheap.requests.at(-1)!.response_format).toEqual(format({}).response_format)
    await usage(withCall('call_2', { smuggled: 'lorem ipsum '.repeat(200) }))
    const sent = mk.sims.atlasCheap.requests.at(-1) as { messages: { tool_calls?: Record<string, unknown>[] }[] }
    expect(sent.messages[1]!.tool_calls).toEqual([
      { id: 'call_2', type: 'function', function: { name: 'weather', arguments: '{}' } },
    ])
  })

  it('refuses a tool or a response format nested deeper than it allows, naming it', async () => {
    const mk = await market()
    // 20,000 arrays in one another, where the gateway reads none of it: written out, as JSON.stringify overflows too.
    const deep = `${'['.repeat(20_000)}1${']'.repeat(20_000)}`
    const head = JSON.stringify(ask).slice(0, -1)
    const tool = `{"type":"function","function":{"name":"weather","parameters":{"type":"object"},"extra":${deep}}}`
    for (const [body, param] of [
      [`${head},"tools":[${tool}]}`, 'tools[0]'],
      [`${head},"response_format":{"type":"json_object","extra":${deep}}}`, 'response_format'],
      [
        `${head},"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},"extra":${deep}}}}`,
        'response_format',
      ],
    ] as const) {
      const res = await chat(mk.url, mk.key, body)
      expect(res.status).toBe(400)
      expect((await res.json()).error).toMatchObject({ code: 'feature_not_supported', param })
    }
  })

  it('refuses values no upstream takes, and leaves out parameters that would only make upstreams refuse', async () => {
    const mk = await market()
    for (const [extra, param] of [
      [{ seed: 1e300 }, 'seed'],
      [{ logit_bias: { 50256: 101 } }, 'logit_bias[50256]'],
      [{ logit_bias: { token: 1 } }, 'logit_bias.token'],
    ] as const) {
      const res = await chat(mk.url, mk.key, { ...ask, ...extra })
      expect(res.status, JSON.stringify(extra)).toBe(400)
      expect((await res.json()).error).toMatchObject({ code: 'feature_not_supported', param })
    }
    const res = await chat(mk.url, mk.key, {
      ...ask,
      tools: [],
      tool_choice: 'none',
      parallel_tool_calls: false,
      top_logprobs: 2,
    })
    expect(res.status).toBe(200)
    const sent = mk.sims.atlasCheap.requests.at(-1)!
    for (const field of ['tools', 'tool_choice', 'parallel_tool_calls', 'top_logprobs'])
      expect(sent).not.toHaveProperty(field)
  })

  it('refuses a cortex request no candidate can take, when there is no vendor, as the client error it is', async () => {
    const mk = await market({ edit: (c) => delete c.managed })
    // Above every candidate's maximum output: no provider could ever serve it.
    const res = await chat(mk.url, mk.key, { ...ask, model: 'svc/cortex@1', max_tokens: 5000 })
    expect(res.status).toBe(400)
    expect(res.headers.get('retry-after')).toBeNull()
    expect((await res.json()).error).toMatchObject({ code: 'feature_not_supported', param: 'max_tokens' })
  })
})
