import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EngineServer } from '../../src/engine/chat-server.js'
import { tokenizerOf } from '../../src/metering/tokenizers.js'
import type { Market } from '../helpers/market.js'
import { DEFAULT_SENTENCE, engineMarket, ENGINE_INSTALLED, THOUGHT, thinkingModelFile } from '../helpers/engine.js'

// A reasoning model on a real engine: it thinks between <think> and </think> (tokens of its own vocabulary), then
// answers; the engine passes the thinking as reasoning_content, the gateway to the client, metered in its tokens.

describe.skipIf(!ENGINE_INSTALLED)('a reasoning model served by node-llama-cpp through the gateway', () => {
  let engine: EngineServer
  let m: Market
  let client: OpenAI
  beforeAll(async () => {
    const file = thinkingModelFile()
    engine = await EngineServer.start({ modelFile: file, name: 'thinker' })
    m = await engineMarket({ baseUrl: engine.url, upstreamModel: 'thinker', model: file, providers: 2 })
    client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
  }, 60_000)
  afterAll(async () => {
    await m?.close()
    await engine?.close()
  })

  const ask = [{ role: 'user' as const, content: 'Where does the river go?' }]
  const thoughtTokens = () => tokenizerOf(thinkingModelFile()).count(THOUGHT)

  it('chat, plain: the thinking as reasoning_content, the answer as content, reasoning tokens in usage', async () => {
    const r = await client.chat.completions.create({ model: 'svc/atlas@1', messages: ask })
    const message = r.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }
    expect(message).toMatchObject({ content: DEFAULT_SENTENCE, reasoning_content: THOUGHT })
    expect(r.usage!.completion_tokens_details!.reasoning_tokens).toBe(thoughtTokens())
    expect(r.usage!.completion_tokens).toBe(thoughtTokens() + tokenizerOf(thinkingModelFile()).count(DEFAULT_SENTENCE))
  })

  it('chat, streamed: reasoning deltas, then content', async () => {
    const stream = await client.chat.completions.create({ model: 'svc/atlas@1', messages: ask, stream: true })
    const kinds: string[] = []
    let reasoning = ''
    let content = ''
    for await (const c of stream) {
      const d = c.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined
      if (d?.reasoning_content) {
        reasoning += d.reasoning_content
        if (kinds.at(-1) !== 'reasoning') kinds.push('reasoning')
      }
      if (d?.content) {
        content += d.content
        if (kinds.at(-1) !== 'content') kinds.push('content')
      }
    }
    expect({ kinds, reasoning, content }).toEqual({
      kinds: ['reasoning', 'content'],
      reasoning: THOUGHT,
      content: DEFAULT_SENTENCE,
    })
  })

  it('Responses: a reasoning item before the message, reasoning tokens in usage', async () => {
    const r = await client.responses.create({ model: 'svc/atlas@1', input: 'Where does the river go?' })
    expect(r.output.map((i) => i.type)).toEqual(['reasoning', 'message'])
    expect((r.output[0] as OpenAI.Responses.ResponseReasoningItem).content).toEqual([
      { type: 'reasoning_text', text: THOUGHT },
    ])
    expect(r.output_text).toBe(DEFAULT_SENTENCE)
    expect(r.usage!.output_tokens_details.reasoning_tokens).toBe(thoughtTokens())
  })
})
