import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { generateText, jsonSchema, stepCountIs, streamText, tool, type ModelMessage } from 'ai'
import { createOpenAICompatible } from '@ai-sdk/openai-compatible'
import { P, startMarket, type Market } from './helpers/market.js'
import { resetSims, TIME, WEATHER } from './helpers/tools.js'

let m: Market
beforeAll(async () => {
  m = await startMarket()
})
afterAll(() => m?.close())
beforeEach(() => resetSims(m))

/** Tools as the ai SDK declares them, executed here; every execution is recorded. */
function agentTools(log: string[]) {
  return {
    get_weather: tool({
      description: WEATHER.function.description,
      inputSchema: jsonSchema<{ city: string; unit: string }>(WEATHER.function.parameters),
      execute: async ({ city, unit }) => (log.push(`get_weather(${city},${unit})`), { city, temperature: 18, unit }),
    }),
    get_time: tool({
      description: TIME.function.description,
      inputSchema: jsonSchema<{ timezone: string }>(TIME.function.parameters),
      execute: async ({ timezone }) => (log.push(`get_time(${timezone})`), { timezone, time: '12:00' }),
    }),
  }
}

const provider = () =>
  createOpenAICompatible({ name: 'svc', baseURL: `${m.url}/v1`, apiKey: m.key, includeUsage: true })

describe('an agent loop driven by the ai SDK (v5) through @ai-sdk/openai-compatible', () => {
  it('generateText runs tools and answers, over three user turns', async () => {
    const log: string[] = []
    const messages: ModelMessage[] = []
    const answers: string[] = []
    for (const question of [
      'Weather in Paris? use get_weather',
      'And the time there? get_time',
      'Both, once more: get_weather and get_time',
    ]) {
      messages.push({ role: 'user', content: question })
      const result = await generateText({
        model: provider()('svc/atlas@1'),
        system: 'You are a travel assistant.',
        messages,
        tools: agentTools(log),
        stopWhen: stepCountIs(5),
        maxRetries: 0,
      })
      expect(result.steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'stop'])
      expect(result.text).toMatch(/^[A-Z]\w*( \w+)+$/)
      answers.push(result.text)
      messages.push(...result.response.messages)
    }
    expect(log).toEqual([
      'get_weather(Paris,celsius)',
      'get_time(Europe/Paris)',
      'get_weather(Paris,celsius)',
      'get_time(Europe/Paris)',
    ])
    expect(answers).toHaveLength(3)
    // The last request carried the whole history, tool results included.
    const last = m.sims.atlasCheap.requests.at(-1)!.messages as { role: string }[]
    expect(last.filter((x) => x.role === 'tool')).toHaveLength(4)
    const usage = await m.store.usage.list(m.accountId, { limit: 6 })
    expect(usage.map((u) => u.outcome)).toEqual(Array(6).fill('completed'))
    expect(usage.every((u) => u.provider === P.atlasCheap && u.cost > 0n)).toBe(true)
  })

  it('streamText assembles whole-call chunks from one-byte upstream deltas and finishes the loop', async () => {
    m.sims.atlasCheap.settings.fragmentation = 'bytes'
    const log: string[] = []
    const result = streamText({
      model: provider()('svc/atlas@1'),
      prompt: 'Call get_weather and get_time',
      tools: agentTools(log),
      stopWhen: stepCountIs(5),
      maxRetries: 0,
    })
    const kinds: string[] = []
    for await (const part of result.fullStream) {
      if (part.type === 'tool-call' || part.type === 'tool-result' || part.type === 'finish-step') kinds.push(part.type)
      if (part.type === 'error') throw part.error
    }
    expect(kinds).toEqual(['tool-call', 'tool-call', 'tool-result', 'tool-result', 'finish-step', 'finish-step'])
    expect(log.sort()).toEqual(['get_time(Europe/Paris)', 'get_weather(Paris,celsius)'])
    expect(await result.text).toMatch(/^[A-Z]\w*( \w+)+$/)
    expect((await result.totalUsage).outputTokens).toBeGreaterThan(0)
  })

  it('a refusal reaches the SDK as an API error with the gateway’s code', async () => {
    const err = await generateText({
      model: provider()('svc/tern@2'),
      prompt: 'hi',
      tools: agentTools([]),
      toolChoice: 'required',
      maxRetries: 0,
    }).then(
      () => ({ statusCode: 200, responseBody: '{}' }),
      (e: unknown) => e as { statusCode?: number; responseBody?: string },
    )
    expect(err).toMatchObject({ statusCode: 400 })
    expect(JSON.parse(err.responseBody!).error).toMatchObject({ code: 'feature_not_supported', param: 'tool_choice' })
  })
})
