import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createOpenAI } from '@ai-sdk/openai'
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai'
import { startMarket, type Market } from './helpers/market.js'
import { resetSims, WEATHER } from './helpers/tools.js'

let m: Market
let openai: ReturnType<typeof createOpenAI>
beforeAll(async () => {
  m = await startMarket()
  openai = createOpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key })
})
afterAll(() => m?.close())
beforeEach(() => resetSims(m))

/** The requests the simulated upstream was sent: chat completions, as providers stay chat upstreams. */
const upstreamCalls = () => m.sims.atlasCheap.requests.length

describe('the AI SDK with openai(model), which speaks the Responses API', () => {
  it('generateText: the text, usage and the response id', async () => {
    const before = upstreamCalls()
    const r = await generateText({ model: openai('svc/atlas@1'), prompt: 'Say hello', maxOutputTokens: 40 })
    expect(r.text).toMatch(/\w+/)
    expect(r.finishReason).toBe('stop')
    expect(r.usage.outputTokens).toBeGreaterThan(0)
    expect(r.usage.totalTokens).toBe(r.usage.inputTokens! + r.usage.outputTokens!)
    expect(r.response.id).toMatch(/^resp_/)
    expect(upstreamCalls()).toBe(before + 1)
  })

  it('streamText: the deltas make the text, and the stream finishes with usage', async () => {
    const r = streamText({ model: openai('svc/atlas@1'), prompt: 'Tell me a story' })
    const parts: string[] = []
    for await (const delta of r.textStream) parts.push(delta)
    expect(parts.length).toBeGreaterThan(1)
    expect(await r.text).toBe(parts.join(''))
    expect(await r.finishReason).toBe('stop')
    expect((await r.usage).outputTokens).toBeGreaterThan(0)
  })

  it('a tool call over two steps: the call, its result, then the answer (the call sent back as item_reference)', async () => {
    const weather = tool({
      description: WEATHER.function.description,
      inputSchema: jsonSchema<{ city: string; unit: string }>(WEATHER.function.parameters as never),
      execute: async ({ city }) => ({ city, temperature: 21 }),
    })
    for (const stream of [false, true]) {
      const args = {
        model: openai('svc/atlas@1'),
        prompt: 'Use get_weather for Paris',
        tools: { get_weather: weather },
        stopWhen: stepCountIs(2),
      }
      const r = stream ? streamText(args) : await generateText(args)
      const steps = await r.steps
      expect(steps).toHaveLength(2)
      expect(steps[0]!.toolCalls.map((c) => [c.toolName, c.input])).toEqual([
        ['get_weather', { city: 'Paris', unit: 'celsius' }],
      ])
      expect(steps[0]!.toolResults.map((t) => t.output)).toEqual([{ city: 'Paris', temperature: 21 }])
      expect(await r.text).toMatch(/\w+/)
      const sent = m.sims.atlasCheap.requests.at(-1)!.messages as { role: string; tool_calls?: unknown[] }[]
      expect(sent.map((x) => x.role)).toEqual(['user', 'assistant', 'tool'])
      expect(sent[1]!.tool_calls).toHaveLength(1)
      expect(JSON.stringify(steps[1]!.request.body)).toContain('"type":"item_reference"')
    }
  })

  it('a multi-turn chat: earlier assistant output is sent back as item_reference and resolved', async () => {
    const first = await generateText({ model: openai('svc/atlas@1'), prompt: 'Say hello' })
    const second = await generateText({
      model: openai('svc/atlas@1'),
      messages: [{ role: 'user', content: 'Say hello' }, ...first.response.messages, { role: 'user', content: 'And?' }],
    })
    expect(second.text).toMatch(/\w+/)
    expect(JSON.stringify(second.request.body)).toContain('"type":"item_reference"')
    expect(m.sims.atlasCheap.requests.at(-1)!.messages).toEqual([
      { role: 'user', content: 'Say hello' },
      { role: 'assistant', content: first.text },
      { role: 'user', content: 'And?' },
    ])
  })
})
