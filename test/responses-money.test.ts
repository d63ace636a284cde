import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import { createOpenAI } from '@ai-sdk/openai'
import { streamText } from 'ai'
import { parseUsdc } from '../src/money/usdc.js'
import { chat, P, startMarket, type Market } from './helpers/market.js'
import { resetSims, snapshot, WEATHER, WEATHER_ARGS } from './helpers/tools.js'

let m: Market
let client: OpenAI
beforeAll(async () => {
  m = await startMarket()
  client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
})
afterAll(() => m?.close())
beforeEach(() => resetSims(m))

interface Svc {
  cost_usdc: string
  provider?: string
  request_id: string
  routing?: { model: string; status: string }
}
const svcOf = (r: unknown) => (r as { svc: Svc }).svc

function responses(body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${m.url}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${m.key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
}

/** The events of a Responses stream, parsed; each `event:` line names its data's type. */
async function events(res: globalThis.Response): Promise<{ type: string; [k: string]: unknown }[]> {
  const blocks = (await res.text()).split('\n\n').filter((b) => b.startsWith('event: '))
  return blocks.map((b) => {
    const [event, data] = b.split('\n')
    const parsed = JSON.parse(data!.slice(6))
    expect(event).toBe(`event: ${parsed.type}`)
    return parsed
  })
}

const record = async (requestId: string) => {
  const { requestId: _, latencyMs: __, createdAt: ___, ...rest } = (await m.store.usage.get(m.accountId, requestId))!
  return rest
}

/** One conversation in both APIs: instructions, a question, a function call and its output, with the tool declared. */
const conversation = {
  chat: {
    model: 'svc/atlas@1',
    max_tokens: 64,
    temperature: 0.5,
    tools: [WEATHER],
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Use get_weather for Paris' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: WEATHER_ARGS } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temperature":21}' },
    ],
  },
  responses: {
    model: 'svc/atlas@1',
    max_output_tokens: 64,
    temperature: 0.5,
    tools: [{ type: 'function', ...WEATHER.function }],
    instructions: 'Be brief.',
    input: [
      { role: 'user', content: [{ type: 'input_text', text: 'Use get_weather for Paris' }] },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: WEATHER_ARGS },
      { type: 'function_call_output', call_id: 'call_1', output: '{"temperature":21}' },
    ],
  },
}

describe('one request life for both APIs', () => {
  it.each([false, true])(
    'stream %s: the usage record and the settled cost equal those of chat completions',
    async (stream) => {
      const viaChat = await chat(m.url, m.key, { ...conversation.chat, stream })
      const chatSvc = stream
        ? JSON.parse(
            (await viaChat.text())
              .split('\n\n')
              .filter((e) => e.includes('"svc"'))[0]!
              .slice(6),
          ).svc
        : svcOf(await viaChat.json())
      const before = await snapshot(m)
      const viaResponses = await responses({ ...conversation.responses, stream })
      const respSvc = stream ? svcOf((await events(viaResponses)).at(-1)!.response) : svcOf(await viaResponses.json())
      const after = await snapshot(m)
      expect(respSvc.cost_usdc).toBe(chatSvc.cost_usdc)
      expect(before.balance - after.balance).toBe(parseUsdc(respSvc.cost_usdc))
      expect(parseUsdc(respSvc.cost_usdc)).toBeGreaterThan(0n)
      expect(await record(respSvc.request_id)).toEqual(await record(chatSvc.request_id))
      expect(await record(respSvc.request_id)).toMatchObject({ outcome: 'completed', provider: P.atlasCheap })
    },
  )

  it('routes svc/cortex@1 and says so in svc.routing', async () => {
    const r = await client.responses.create({ model: 'svc/cortex@1', input: 'route me', max_output_tokens: 20 })
    expect(svcOf(r).routing).toMatchObject({ status: 'available' })
    expect(r.model).toBe('svc/cortex@1')
  })

  it('text.format json_schema where the model has structured outputs; refused where it has not', async () => {
    const format = {
      type: 'json_schema' as const,
      name: 'city',
      schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    }
    const r = await client.responses.create({ model: 'svc/atlas@1', input: 'A city', text: { format } })
    expect(JSON.parse(r.output_text)).toHaveProperty('city')
    expect(m.sims.atlasCheap.requests.at(-1)).toMatchObject({
      response_format: { type: 'json_schema', json_schema: { name: 'city', schema: format.schema } },
    })
    const err = await client.responses
      .create({ model: 'svc/wren@1', input: 'A city', text: { format } })
      .catch((e) => e)
    expect(err).toMatchObject({ status: 400, code: 'feature_not_supported', param: 'text.format' })
  })

  it('a retry under the same Idempotency-Key gets the same response, charged once', async () => {
    const before = await snapshot(m)
    const body = { model: 'svc/atlas@1', input: 'once', max_output_tokens: 20 }
    const first = await responses(body, { 'idempotency-key': 'resp-once' })
    const again = await responses(body, { 'idempotency-key': 'resp-once' })
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    const [a, b] = [await first.json(), await again.json()]
    expect(b).toEqual(a)
    expect(a.object).toBe('response')
    expect(before.balance - (await snapshot(m)).balance).toBe(parseUsdc(a.svc.cost_usdc))
    // The same key on chat completions is another request's body: refused, never a replay of the response.
    const chatRetry = await chat(
      m.url,
      m.key,
      { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'once' }] },
      {
        'idempotency-key': 'resp-once',
      },
    )
    expect(chatRetry.status).toBe(409)
    // And a Responses body that differs only in what the chat request does not carry (store) is another body too.
    const stored = await responses({ ...body, store: false }, { 'idempotency-key': 'resp-once' })
    expect(stored.status).toBe(409)
  })
})

describe('a stream that fails', () => {
  it('after output began: response.failed with stream_interrupted, its text so far, and nothing charged', async () => {
    m.sims.atlasCheap.setFault({ kind: 'break-after', chunks: 3 })
    const before = await snapshot(m)
    const res = await responses({ model: 'svc/atlas@1', input: 'Tell me a story', stream: true })
    expect(res.status).toBe(200)
    const evs = await events(res)
    expect(evs[0]!.type).toBe('response.created')
    expect(evs.filter((e) => e.type === 'response.output_text.delta')).toHaveLength(3)
    const last = evs.at(-1)! as {
      type: string
      response: { status: string; error: unknown; svc: Svc; output: unknown }
    }
    expect(last.type).toBe('response.failed')
    expect(last.response.status).toBe('failed')
    expect(last.response.error).toMatchObject({ code: 'stream_interrupted' })
    expect(last.response.svc).toMatchObject({ cost_usdc: '0.000000', provider: P.atlasCheap })
    const sent = evs.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('')
    expect(last.response).toMatchObject({
      output: [{ type: 'message', status: 'incomplete', content: [{ text: sent }] }],
    })
    expect((await snapshot(m)).balance).toBe(before.balance)
    const [usage] = await m.store.usage.list(m.accountId, { limit: 1 })
    expect(usage).toMatchObject({ outcome: 'stream_interrupted', cost: 0n })
  })

  it('read by the openai SDK stream helper (no unknown event) and the AI SDK: failed, not finished', async () => {
    m.sims.atlasCheap.setFault({ kind: 'break-after', chunks: 2 })
    const stream = client.responses.stream({ model: 'svc/atlas@1', input: 'Tell me a story' })
    const types: string[] = []
    for await (const e of stream) types.push(e.type)
    const final = await stream.finalResponse()
    expect(types.at(-1)).toBe('response.failed')
    expect(final.status).toBe('failed')
    expect(final.error).toMatchObject({ code: 'stream_interrupted' })
    const openai = createOpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key })
    const r = streamText({ model: openai('svc/atlas@1'), prompt: 'Tell me a story' })
    expect(await r.finishReason).not.toBe('stop')
    expect(await r.text).toBe(final.output_text)
  })

  it('an invalid tool call from every provider: provider_output_invalid, as chat completions answer it', async () => {
    m.sims.atlasCheap.setFault({ kind: 'bad-tool-args' })
    m.sims.atlasDear.setFault({ kind: 'bad-tool-args' })
    const tools = [{ type: 'function', ...WEATHER.function }]
    const res = await responses({ model: 'svc/atlas@1', input: 'Use get_weather', tools, stream: true })
    expect(res.status).toBe(502)
    expect(res.headers.get('retry-after')).not.toBeNull()
    expect((await res.json()).error).toMatchObject({ code: 'provider_output_invalid', type: 'api_error' })
  })
})

describe('keeping for 24 hours', () => {
  it('a kept response is found within its retention, refused past it, and deleted by the sweep', async () => {
    let offset = 0
    const mk = await startMarket({ now: () => Date.now() + offset })
    try {
      const c = new OpenAI({ baseURL: `${mk.url}/v1`, apiKey: mk.key, maxRetries: 0 })
      const first = await c.responses.create({ model: 'svc/atlas@1', input: 'hi', max_output_tokens: 5 })
      offset = 23 * 3_600_000
      await mk.server.gateway.lifecycle.sweep()
      const next = await c.responses.create({ model: 'svc/atlas@1', previous_response_id: first.id, input: 'more' })
      expect(next.previous_response_id).toBe(first.id)
      offset = 25 * 3_600_000
      const late = await c.responses
        .create({ model: 'svc/atlas@1', previous_response_id: first.id, input: 'more' })
        .catch((e) => e)
      expect(late).toMatchObject({ status: 400, param: 'previous_response_id' })
      await mk.server.gateway.lifecycle.sweep()
      // Read at the time they were kept, the first response's rows are gone; the second's, 2 hours old, stay.
      const ids = [first.id, first.output[0]!.id!, next.id]
      const kept = await mk.store.keptResponses.read(await keyIdOf(mk), ids, Date.now())
      expect([...kept.keys()]).toEqual([next.id])
    } finally {
      await mk.close()
    }
  })
})

async function keyIdOf(mk: Market): Promise<string> {
  const [u] = await mk.store.usage.list(mk.accountId, { limit: 1 })
  return u!.keyId
}
