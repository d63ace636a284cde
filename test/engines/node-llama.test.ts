import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EngineServer } from '../../src/engine/chat-server.js'
import { countOutput } from '../../src/metering/tokens.js'
import { priceOf } from '../../src/money/usdc.js'
import { chat, P, type Market } from '../helpers/market.js'
import { snapshot } from '../helpers/tools.js'
import { engineMarket, ENGINE_INSTALLED, modelFile, SENTENCE, SENTENCE_TOKENS } from '../helpers/engine.js'

// A real engine behind the gateway: node-llama-cpp (installed in engines/ by `npm ci` there; these tests skip without
// it) running a model the project makes itself (scripts/make-model.mjs) over Qwen2's real vocabulary, which answers
// every turn with one sentence. No weights are fetched.

const ATLAS_CHEAP = { input: 150_000n, output: 600_000n }
const ATLAS_DEAR = { input: 200_000n, output: 800_000n }

describe.skipIf(!ENGINE_INSTALLED)('node-llama-cpp serving a real GGUF model through the gateway', () => {
  let engine: EngineServer
  let m: Market
  let client: OpenAI
  beforeAll(async () => {
    engine = await EngineServer.start({ modelFile: modelFile(), name: 'bigram', sequences: 2 })
    // Both providers of atlas are the engine, metered in the model's own tokenizer (metering version 2).
    m = await engineMarket({ baseUrl: engine.url, upstreamModel: 'bigram', model: modelFile(), providers: 2 })
    client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
  }, 60_000)
  afterAll(async () => {
    await m?.close()
    await engine?.close()
  })

  /** The text of the reply's first three tokens, as the stream showed them. */
  let firstThree = ''
  const ask = [{ role: 'user' as const, content: 'Where does the river go?' }]

  it('answers plain, whole and finished, metered and charged in the model’s own tokens', async () => {
    const before = await snapshot(m)
    const r = await client.chat.completions.create({ model: 'svc/atlas@1', messages: ask })
    expect(r.choices[0]).toMatchObject({ message: { content: SENTENCE }, finish_reason: 'stop' })
    // Qwen2's tokens of the sentence, as the engine generated them (o200k would say otherwise).
    expect(r.usage!.completion_tokens).toBe(SENTENCE_TOKENS)
    expect(countOutput(SENTENCE, [])).not.toBe(SENTENCE_TOKENS)
    const [record] = await m.store.usage.list(m.accountId, { limit: 1 })
    // The engine counts the end of its turn too.
    expect(record).toMatchObject({ outcome: 'completed', upstreamCompletionTokens: SENTENCE_TOKENS + 1 })
    // The input estimate, in the same tokens: the messages' text and the template's overhead, near the engine's count.
    expect(Math.abs(record!.promptTokens - record!.upstreamPromptTokens!)).toBeLessThanOrEqual(4)
    expect([P.atlasCheap, P.atlasDear]).toContain(record!.provider)
    const prices = record!.provider === P.atlasCheap ? ATLAS_CHEAP : ATLAS_DEAR
    expect(record!.cost).toBe(priceOf(prices, r.usage!.prompt_tokens, SENTENCE_TOKENS))
    expect((await snapshot(m)).balance).toBe(before.balance - record!.cost)
  })

  it('streams the reply token by token, with usage and the finish', async () => {
    const stream = await client.chat.completions.create({ model: 'svc/atlas@1', messages: ask, stream: true })
    const deltas: string[] = []
    let finish: string | null = null
    for await (const c of stream) {
      if (c.choices[0]?.delta.content) deltas.push(c.choices[0].delta.content)
      finish ??= c.choices[0]?.finish_reason ?? null
    }
    expect(deltas.join('')).toBe(SENTENCE)
    expect(deltas.length).toBe(SENTENCE_TOKENS)
    expect(finish).toBe('stop')
    firstThree = deltas.slice(0, 3).join('')
  })

  it('stops at max_tokens with finish_reason length, charged for what was said', async () => {
    const before = await snapshot(m)
    const r = await client.chat.completions.create({ model: 'svc/atlas@1', messages: ask, max_tokens: 3 })
    expect(firstThree.length).toBeGreaterThan(0)
    expect(r.choices[0]).toMatchObject({ message: { content: firstThree }, finish_reason: 'length' })
    const [record] = await m.store.usage.list(m.accountId, { limit: 1 })
    expect(record).toMatchObject({ outcome: 'completed', completionTokens: 3, upstreamCompletionTokens: 3 })
    expect((await snapshot(m)).balance).toBe(before.balance - record!.cost)
  })

  it('carries a conversation: the history goes to the model, and it answers the last turn', async () => {
    const r = await client.chat.completions.create({
      model: 'svc/atlas@1',
      messages: [
        { role: 'system', content: 'Be brief.' },
        ...ask,
        { role: 'assistant', content: SENTENCE },
        { role: 'user', content: 'And then?' },
      ],
    })
    expect(r.choices[0]!.message.content).toBe(SENTENCE)
    const [record] = await m.store.usage.list(m.accountId, { limit: 1 })
    expect(record!.upstreamPromptTokens).toBeGreaterThan(SENTENCE_TOKENS + 10)
  })

  it('stops generating for a client that leaves mid-stream, and serves the next request', async () => {
    const { served, aborted } = engine.stats
    const res = await chat(m.url, m.key, { model: 'svc/atlas@1', messages: ask, stream: true })
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    await reader.read()
    await reader.cancel()
    await expect.poll(() => engine.stats.aborted, { timeout: 5000 }).toBe(aborted + 1)
    expect(engine.stats.served).toBe(served)
    const [record] = await m.store.usage.list(m.accountId, { limit: 1 })
    expect(record!.outcome).toBe('client_closed')
    const r = await client.chat.completions.create({ model: 'svc/atlas@1', messages: ask })
    expect(r.choices[0]!.message.content).toBe(SENTENCE)
  })

  it('lists its model', async () => {
    const res = await fetch(`${engine.url}/models`)
    expect(((await res.json()) as { data: { id: string }[] }).data.map((d) => d.id)).toEqual(['bigram'])
  })
})
