import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import { chat, P, sseEvents, startMarket, type Market } from './helpers/market.js'

let m: Market
beforeAll(async () => {
  m = await startMarket()
})
afterAll(() => m?.close())

const hello = [{ role: 'user', content: 'What is the capital of France?' }]

describe('plain chat completion', () => {
  it('answers in the chat completions shape with the svc object', async () => {
    const res = await chat(m.url, m.key, { model: 'svc/atlas@1', messages: hello, max_tokens: 50 })
    expect(res.status).toBe(200)
    const requestId = res.headers.get('x-request-id')!
    expect(requestId).toMatch(/^req_[0-9A-Z]{26}$/)
    const body = await res.json()
    expect(body.object).toBe('chat.completion')
    expect(body.id).toBe(`chatcmpl-${requestId.slice(4)}`)
    expect(body.model).toBe('svc/atlas@1')
    expect(body.system_fingerprint).toBe('vllm-0.6:sim')
    expect(body.choices[0].message.role).toBe('assistant')
    expect(body.choices[0].message.content.split(' ')).toHaveLength(12)
    expect(body.choices[0].finish_reason).toBe('stop')
    expect(body.usage.completion_tokens).toBe(12)
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + 12)
    // 150000 per Mtok input, 600000 per Mtok output, rounded up to a base unit.
    const expected = Math.ceil((body.usage.prompt_tokens * 150000 + 12 * 600000) / 1e6)
    expect(body.svc).toEqual({
      cost_usdc: `0.${String(expected).padStart(6, '0')}`,
      provider: P.atlasCheap,
      request_id: requestId,
      receipt_id: `rct_${requestId.slice(4)}`,
    })
  })
})

describe('streamed chat completion', () => {
  it('sends role, content, finish, usage, svc and [DONE] in that order', async () => {
    const res = await chat(m.url, m.key, { model: 'svc/atlas@1', messages: hello, stream: true, max_tokens: 5 })
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const requestId = res.headers.get('x-request-id')
    const events = await sseEvents(res)
    expect(events.at(-1)).toBe('[DONE]')
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e))
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' })
    const contents = chunks.slice(1, 6)
    expect(contents.map((c) => Object.keys(c.choices[0].delta))).toEqual([
      ['content'],
      ['content'],
      ['content'],
      ['content'],
      ['content'],
    ])
    expect(chunks[6].choices[0]).toEqual({ index: 0, delta: {}, finish_reason: 'length' })
    expect(chunks[7].choices).toEqual([])
    expect(chunks[7].usage.completion_tokens).toBe(5)
    expect(chunks[8].choices).toEqual([])
    expect(chunks[8].svc.provider).toBe(P.atlasCheap)
    expect(chunks[8].svc.request_id).toBe(requestId)
    expect(chunks).toHaveLength(9)
    for (const c of chunks) {
      expect(c.object).toBe('chat.completion.chunk')
      expect(c.system_fingerprint).toBe('vllm-0.6:sim')
      expect(c.model).toBe('svc/atlas@1')
    }
  })
})

describe('official openai SDK', () => {
  it('creates completions and iterates streams', async () => {
    const client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key })
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 8,
    })
    expect(r.choices[0]!.message.content).toBeTruthy()
    expect((r as unknown as { svc: { cost_usdc: string } }).svc.cost_usdc).toMatch(/^\d+\.\d{6}$/)
    const stream = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    })
    let text = ''
    let svc: unknown
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? ''
      if ((chunk as unknown as { svc?: unknown }).svc) svc = (chunk as unknown as { svc: unknown }).svc
    }
    expect(text.split(' ')).toHaveLength(12)
    expect(svc).toMatchObject({ provider: P.atlasCheap })
  })

  it("passes back the upstream's token log probabilities when asked, plain and streamed", async () => {
    const client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key })
    const ask = {
      model: 'svc/atlas@1',
      messages: [{ role: 'user' as const, content: 'hi' }],
      max_tokens: 8,
      logprobs: true,
      top_logprobs: 2,
    }
    const r = await client.chat.completions.create(ask)
    const entries = r.choices[0]!.logprobs!.content!
    expect(entries).toHaveLength(8)
    expect(entries.map((e) => e.token).join('')).toBe(r.choices[0]!.message.content)
    for (const e of entries) {
      expect(e.logprob).toBeLessThanOrEqual(0)
      expect(Buffer.from(e.bytes!).toString()).toBe(e.token)
      expect(e.top_logprobs).toHaveLength(2)
    }
    const stream = await client.chat.completions.create({ ...ask, stream: true })
    const streamed: { token: string }[] = []
    let text = ''
    for await (const chunk of stream) {
      const choice = chunk.choices[0]
      if (!choice?.delta.content) continue
      text += choice.delta.content
      // Each content chunk carries the entries of its own text.
      expect(choice.logprobs!.content!.map((e) => e.token).join('')).toBe(choice.delta.content)
      streamed.push(...choice.logprobs!.content!)
    }
    expect(streamed.map((e) => e.token).join('')).toBe(text)
    expect(streamed).toHaveLength(8)
    // Not asked: the choice has none, as before.
    const plain = await client.chat.completions.create({ ...ask, logprobs: false })
    expect(plain.choices[0]).not.toHaveProperty('logprobs')
  })

  it('raises typed errors with codes', async () => {
    const client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: 'svc_test_nope', maxRetries: 0 })
    await expect(
      client.chat.completions.create({ model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toMatchObject({ status: 401, code: 'invalid_api_key' })
  })
})
