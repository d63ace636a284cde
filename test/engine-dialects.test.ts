import OpenAI from 'openai'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { chat, P, sseEvents, startMarket, type Market } from './helpers/market.js'
import { resetSims, snapshot, WEATHER } from './helpers/tools.js'
import { DIALECT_NAMES, type DialectName } from '../src/providers/simulated/dialects/index.js'
import type { SimSettings } from '../src/providers/simulated/server.js'
import { countOutput } from '../src/metering/tokens.js'
import { priceOf } from '../src/money/usdc.js'
import { SimulatedProvider } from '../src/providers/simulated/server.js'
import { probeEndpoint } from '../src/tools/certify.js'

// Every serving engine's wire (the simulated upstream's dialects) through the whole gateway, read by the openai SDK.

let m: Market
let client: OpenAI
/** A market of its own for each engine: the failures one's tests cause leave no breaker open for the next. */
function eachMarket(breakerFailures: number, tuning: Market['config']['tuning'] = {}) {
  beforeAll(async () => {
    m = await startMarket({ tuning: { breakerFailures, ...tuning } })
    client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
  })
  afterAll(() => m?.close())
  beforeEach(() => resetSims(m))
}

const MODEL = 'svc/atlas@1'
const ATLAS_PRICES = { input: 150_000n, output: 600_000n }
const story = [{ role: 'user' as const, content: 'Tell me a story' }]

/** Both providers of atlas speak `dialect`. */
function speak(dialect: DialectName, settings: Partial<SimSettings> = {}) {
  for (const sim of [m.sims.atlasCheap, m.sims.atlasDear]) sim.settings = { ...sim.settings, dialect, ...settings }
}

/** The text the openai dialect answers `story` with: every engine must deliver the same, whole. */
async function expected(): Promise<string> {
  speak('openai')
  const r = await client.chat.completions.create({ model: MODEL, messages: story })
  return r.choices[0]!.message.content!
}

describe.each(DIALECT_NAMES)('an upstream speaking %s', (dialect) => {
  eachMarket(100)
  it('delivers a plain and a streamed reply whole, finished, with usage', async () => {
    const text = await expected()
    speak(dialect)
    const plain = await client.chat.completions.create({ model: MODEL, messages: story })
    expect(plain.choices[0]).toMatchObject({ message: { role: 'assistant', content: text }, finish_reason: 'stop' })
    expect(plain.usage!.completion_tokens).toBe(countOutput(text, []))
    const stream = await client.chat.completions.create({ model: MODEL, messages: story, stream: true })
    let said = ''
    const finishes: (string | null)[] = []
    let usage: OpenAI.CompletionUsage | undefined
    for await (const c of stream) {
      said += c.choices[0]?.delta.content ?? ''
      if (c.choices[0]?.finish_reason) finishes.push(c.choices[0].finish_reason)
      usage ??= c.usage ?? undefined
    }
    expect(said).toBe(text)
    expect(finishes).toEqual(['stop'])
    expect(usage!.completion_tokens).toBe(plain.usage!.completion_tokens)
  })

  it('delivers a tool call whole, plain and streamed', async () => {
    speak(dialect)
    const ask = { model: MODEL, messages: [{ role: 'user' as const, content: 'Weather?' }], tools: [WEATHER] }
    const plain = await client.chat.completions.create(ask)
    expect(plain.choices[0]!.finish_reason).toBe('tool_calls')
    const [call] = plain.choices[0]!.message.tool_calls! as OpenAI.ChatCompletionMessageFunctionToolCall[]
    expect(call!.function.name).toBe('get_weather')
    expect(JSON.parse(call!.function.arguments)).toEqual({ city: expect.any(String), unit: expect.any(String) })
    const stream = await client.chat.completions.create({ ...ask, stream: true })
    let args = ''
    let name = ''
    let finish: string | null = null
    for await (const c of stream) {
      for (const d of c.choices[0]?.delta.tool_calls ?? []) {
        name += d.function?.name ?? ''
        args += d.function?.arguments ?? ''
      }
      finish ??= c.choices[0]?.finish_reason ?? null
    }
    expect({ name, args: JSON.parse(args), finish }).toEqual({
      name: 'get_weather',
      args: JSON.parse(call!.function.arguments),
      finish: 'tool_calls',
    })
  })

  // TGI has no reasoning parser: a model's thinking reaches the client as its content.
  it.skipIf(dialect === 'tgi')('passes reasoning on, reports it in usage and charges it as output', async () => {
    speak(dialect, { reasoningTokens: 5 })
    const plain = await client.chat.completions.create({ model: MODEL, messages: story })
    const message = plain.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }
    const thought = message.reasoning_content!
    expect(thought.split(' ')).toHaveLength(5)
    const reasoning = countOutput(thought, [])
    expect(plain.usage!.completion_tokens_details!.reasoning_tokens).toBe(reasoning)
    expect(plain.usage!.completion_tokens).toBe(reasoning + countOutput(message.content!, []))
    const [record] = await m.store.usage.list(m.accountId, { limit: 1 })
    expect(record!.cost).toBe(priceOf(ATLAS_PRICES, plain.usage!.prompt_tokens, plain.usage!.completion_tokens))

    const stream = await client.chat.completions.create({ model: MODEL, messages: story, stream: true })
    let streamed = ''
    let content = ''
    for await (const c of stream) {
      const delta = c.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined
      // Reasoning comes first: no content before the thinking is done.
      if (delta?.reasoning_content) expect(content).toBe('')
      streamed += delta?.reasoning_content ?? ''
      content += delta?.content ?? ''
    }
    expect({ streamed, content }).toEqual({ streamed: thought, content: message.content })

    const r = await client.responses.create({ model: MODEL, input: 'Tell me a story' })
    expect(r.output.map((i) => i.type)).toEqual(['reasoning', 'message'])
    const item = r.output[0] as OpenAI.Responses.ResponseReasoningItem
    expect(item.content).toEqual([{ type: 'reasoning_text', text: thought }])
    expect(r.output_text).toBe(message.content)
    expect(r.usage!.output_tokens_details.reasoning_tokens).toBe(reasoning)
  })

  it('never delivers a generation the engine gave up as finished: failed over plain, interrupted streamed', async () => {
    speak(dialect)
    m.sims.atlasCheap.setFault({ kind: 'abort-after', chunks: 2 })
    const plain = await chat(m.url, m.key, { model: MODEL, messages: story })
    expect(plain.status).toBe(200)
    const body = (await plain.json()) as { choices: { finish_reason: string }[]; svc: { provider: string } }
    expect(body.svc.provider).toBe(P.atlasDear)
    expect(body.choices[0]!.finish_reason).toBe('stop')

    const before = await snapshot(m)
    const res = await chat(m.url, m.key, { model: MODEL, messages: story, stream: true })
    const chunks = (await sseEvents(res)).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d))
    expect(chunks.some((c) => c.choices?.[0]?.finish_reason)).toBe(false)
    expect(chunks.at(-1)).toMatchObject({ error: { code: 'stream_interrupted' } })
    const [record] = await m.store.usage.list(m.accountId, { limit: 1 })
    // A broken stream is charged nothing (docs/interface.md §4.1), whatever reached the client.
    expect(record).toMatchObject({ outcome: 'stream_interrupted', provider: P.atlasCheap, cost: 0n })
    expect(await snapshot(m)).toEqual(before)
  })

  it('ends a stream the engine broke with an error as interrupted, charged for what was said', async () => {
    speak(dialect)
    m.sims.atlasCheap.setFault({ kind: 'error-after', chunks: 3 })
    const before = await snapshot(m)
    const res = await chat(m.url, m.key, { model: MODEL, messages: story, stream: true })
    const chunks = (await sseEvents(res)).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d))
    const said = chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('')
    expect(said.length).toBeGreaterThan(0)
    expect(chunks.at(-1)).toMatchObject({ error: { code: 'stream_interrupted' } })
    const [record] = await m.store.usage.list(m.accountId, { limit: 1 })
    expect(record).toMatchObject({ outcome: 'stream_interrupted', provider: P.atlasCheap, cost: 0n })
    expect(await snapshot(m)).toEqual(before)
  })
})

// OpenAI's own in-stream error names no status; every engine's does, or answers the error plainly.
describe.each(DIALECT_NAMES.filter((d) => d !== 'openai'))('an upstream speaking %s refusing a request', (dialect) => {
  eachMarket(3)
  it('is the request’s fault, not the upstream’s: no breaker opens, nothing is charged', async () => {
    speak(dialect)
    m.sims.atlasCheap.setFault({ kind: 'refuse-in-stream' })
    m.sims.atlasDear.setFault({ kind: 'refuse-in-stream' })
    const before = await snapshot(m)
    const asked = m.sims.atlasCheap.stats.requests
    // More than the breaker's failures (3): each still reaches the upstream, and is refused as invalid.
    for (let i = 0; i < 5; i++) {
      const res = await chat(m.url, m.key, { model: MODEL, messages: story, stream: true })
      expect(res.status).toBe(400)
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('feature_not_supported')
    }
    expect(m.sims.atlasCheap.stats.requests - asked).toBe(5)
    expect(await snapshot(m)).toEqual(before)
  })
})

describe('a model that thinks for longer than the first-byte timeout', () => {
  // Chunks 100 ms apart, within the idle timeout; all the reasoning together is more than twice it.
  eachMarket(100, { idleTimeoutMs: 400 })
  it('is not cut off: its reasoning is progress, for the first-byte and the idle timer', async () => {
    // 12 reasoning words 100 ms apart: over twice the market's first-byte timeout (500 ms) before any content.
    speak('vllm', { reasoningTokens: 12, chunkDelayMs: 100 })
    const stream = await client.chat.completions.create({ model: MODEL, messages: story, stream: true })
    let reasoning = ''
    let content = ''
    let provider: string | undefined
    for await (const c of stream) {
      const delta = c.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined
      reasoning += delta?.reasoning_content ?? ''
      content += delta?.content ?? ''
      provider ??= (c as { svc?: { provider: string } }).svc?.provider
    }
    expect(reasoning.split(' ')).toHaveLength(12)
    expect(content.length).toBeGreaterThan(0)
    expect(provider).toBe(P.atlasCheap)
  }, 20_000)
})

describe.each(DIALECT_NAMES)('an endpoint speaking %s, registered by a provider', (dialect) => {
  it('passes the probe an offer must pass to go live: plain, streamed, a tool call each way', async () => {
    const sim = await SimulatedProvider.start({ dialect })
    try {
      expect(await probeEndpoint({ baseUrl: sim.url, model: 'atlas', tools: true, timeoutMs: 5000 })).toBeNull()
    } finally {
      await sim.close()
    }
  })
})

describe('an engine that closes its connection right after each streamed reply (llama.cpp)', () => {
  eachMarket(100)
  it('serves 500 streamed requests 8 at a time, every one whole, none failed over', async () => {
    // Closed 20 ms after the stream rather than llama.cpp's 1 ms: a connection the pool reuses meanwhile is dropped
    // often enough that, without the retry, failovers show.
    speak('llamacpp', { closeAfterStreamMs: 20 })
    const providers = new Map<string, number>()
    let next = 0
    const worker = async () => {
      while (next++ < 500) {
        const res = await chat(m.url, m.key, { model: MODEL, messages: story, stream: true })
        expect(res.status).toBe(200)
        const chunks = (await sseEvents(res)).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d))
        expect(chunks.some((c) => c.error)).toBe(false)
        expect(chunks.some((c) => c.choices?.[0]?.finish_reason === 'stop')).toBe(true)
        const provider = chunks.at(-1).svc.provider as string
        providers.set(provider, (providers.get(provider) ?? 0) + 1)
      }
    }
    await Promise.all(Array.from({ length: 8 }, worker))
    expect(Object.fromEntries(providers)).toEqual({ [P.atlasCheap]: 500 })
  }, 60_000)
})
