import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { parseUsdc } from '../src/money/usdc.js'
import { startMarket, type Market } from './helpers/market.js'

const WEATHER = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
}

describe("Anthropic's Messages API through @anthropic-ai/sdk", () => {
  let m: Market
  let client: Anthropic

  beforeAll(async () => {
    m = await startMarket()
    client = new Anthropic({ baseURL: m.url, apiKey: m.key, maxRetries: 0 })
  })
  afterAll(() => m?.close())

  const balance = async () => (await m.store.accounts.byId(m.accountId))!.balance
  const costOf = (msg: unknown) => parseUsdc((msg as { svc: { cost_usdc: string } }).svc.cost_usdc)!

  it('answers messages.create with a system prompt, charged once with a usage record', async () => {
    const before = await balance()
    const msg = await client.messages.create({
      model: 'svc/atlas@1',
      max_tokens: 64,
      system: 'You are terse.',
      messages: [{ role: 'user', content: 'Say something.' }],
    })
    expect(msg).toMatchObject({ type: 'message', role: 'assistant', model: 'svc/atlas@1', stop_sequence: null })
    expect(msg.id).toMatch(/^msg_/)
    expect(msg.content[0]).toMatchObject({ type: 'text' })
    expect((msg.content[0] as { text: string }).text.length).toBeGreaterThan(0)
    expect(['end_turn', 'max_tokens']).toContain(msg.stop_reason)
    expect(msg.usage.input_tokens).toBeGreaterThan(0)
    expect(msg.usage.output_tokens).toBeGreaterThan(0)
    // The system prompt reached the provider as the chat request's system message.
    expect(m.sims.atlasCheap.requests.at(-1)).toMatchObject({
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Say something.' },
      ],
      max_tokens: 64,
    })
    const cost = costOf(msg)
    expect(cost).toBeGreaterThan(0n)
    expect(await balance()).toBe(before - cost)
    const requestId = (msg as unknown as { svc: { request_id: string } }).svc.request_id
    expect(await m.store.usage.get(m.accountId, requestId)).toMatchObject({
      promptTokens: msg.usage.input_tokens,
      completionTokens: msg.usage.output_tokens,
      cost,
    })
  })

  it('streams with messages.stream in Anthropic’s event order, usage and svc in message_delta', async () => {
    const before = await balance()
    const stream = client.messages.stream({
      model: 'svc/atlas@1',
      max_tokens: 48,
      messages: [{ role: 'user', content: 'Tell me more.' }],
    })
    const types: string[] = []
    let text = ''
    stream.on('streamEvent', (e) => types.push(e.type))
    stream.on('text', (t) => (text += t))
    const final = await stream.finalMessage()
    expect(types[0]).toBe('message_start')
    expect(types.at(-1)).toBe('message_stop')
    expect(types.at(-2)).toBe('message_delta')
    expect(types).toContain('content_block_start')
    expect(types).toContain('content_block_delta')
    expect(types).toContain('content_block_stop')
    expect((final.content[0] as { text: string }).text).toBe(text)
    expect(final.usage.output_tokens).toBeGreaterThan(0)
    expect(['end_turn', 'max_tokens']).toContain(final.stop_reason)
    const spent = before - (await balance())
    expect(spent).toBeGreaterThan(0n)
  })

  it('round-trips tool use: tool_use blocks out, tool_result blocks back, then text', async () => {
    const first = await client.messages.create({
      model: 'svc/atlas@1',
      max_tokens: 200,
      tools: [WEATHER],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [{ role: 'user', content: 'What is the weather in Paris? Use get_weather.' }],
    })
    expect(first.stop_reason).toBe('tool_use')
    const use = first.content.find((b) => b.type === 'tool_use')!
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather' })
    expect(typeof (use as { input: unknown }).input).toBe('object')
    expect(m.sims.atlasCheap.requests.at(-1)).toMatchObject({
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: WEATHER.input_schema } }],
    })
    const id = (use as { id: string }).id
    const second = await client.messages.create({
      model: 'svc/atlas@1',
      max_tokens: 64,
      tools: [WEATHER],
      messages: [
        { role: 'user', content: 'What is the weather in Paris? Use get_weather.' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'Sunny, 21 C' }] },
      ],
    })
    expect(second.content[0]).toMatchObject({ type: 'text' })
    expect(second.stop_reason).not.toBe('tool_use')
    const sent = m.sims.atlasCheap.requests.at(-1) as { messages: Record<string, unknown>[] }
    expect(sent.messages.slice(1)).toMatchObject([
      { role: 'assistant', tool_calls: [{ id, type: 'function', function: { name: 'get_weather' } }] },
      { role: 'tool', tool_call_id: id, content: 'Sunny, 21 C' },
    ])
    // A streamed tool call comes whole, as an input_json_delta the SDK assembles.
    const streamed = await client.messages
      .stream({
        model: 'svc/atlas@1',
        max_tokens: 200,
        tools: [WEATHER],
        tool_choice: { type: 'any' },
        messages: [{ role: 'user', content: 'Weather in Oslo? Use get_weather.' }],
      })
      .finalMessage()
    expect(streamed.stop_reason).toBe('tool_use')
    expect(streamed.content.find((b) => b.type === 'tool_use')).toMatchObject({ name: 'get_weather' })
  })

  it("refuses in Anthropic's error shapes, with our statuses, charging nothing", async () => {
    const before = await balance()
    const wrongKey = new Anthropic({ baseURL: m.url, apiKey: 'svc_test_wrong', maxRetries: 0 })
    await expect(
      wrongKey.messages.create({ model: 'svc/atlas@1', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({ status: 401, error: { type: 'error', error: { type: 'authentication_error' } } })
    await expect(
      client.messages.create({ model: 'svc/none@1', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({ status: 404, error: { error: { type: 'not_found_error', code: 'model_not_found' } } })
    const raw = await fetch(`${m.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': m.key, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'svc/atlas@1', messages: [{ role: 'user', content: 'x' }] }),
    })
    expect(raw.status).toBe(400)
    expect(await raw.json()).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', param: 'max_tokens' },
      request_id: raw.headers.get('x-request-id'),
    })
    const image = await fetch(`${m.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${m.key}` },
      body: JSON.stringify({
        model: 'svc/atlas@1',
        max_tokens: 8,
        messages: [
          {
            role: 'user',
            content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }],
          },
        ],
      }),
    })
    // Not a readable image (and svc/atlas@1 takes none here).
    expect(image.status).toBe(400)
    expect((await image.json()).error).toMatchObject({
      type: 'invalid_request_error',
      message: expect.stringMatching(/image/),
    })
    const broken = await fetch(`${m.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': m.key },
      body: '{not json',
    })
    expect(broken.status).toBe(400)
    expect((await broken.json()).type).toBe('error')
    expect(await balance()).toBe(before)
  })

  it('refuses what the account cannot cover as billing_error, 402', async () => {
    const account = (await m.store.accounts.byId(m.accountId))!
    await m.store.accounts.approve(m.accountId, 0n)
    try {
      await expect(
        client.messages.create({ model: 'svc/atlas@1', max_tokens: 64, messages: [{ role: 'user', content: 'x' }] }),
      ).rejects.toMatchObject({ status: 402, error: { error: { type: 'billing_error', code: 'insufficient_quota' } } })
    } finally {
      await m.store.accounts.approve(m.accountId, account.cap)
    }
  })
})
