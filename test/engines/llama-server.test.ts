import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ENGINES_DIR } from '../../src/engine/node-llama.js'
import type { Market } from '../helpers/market.js'
import { DEFAULT_SENTENCE, engineMarket, THOUGHT, thinkingModelFile } from '../helpers/engine.js'
import { LLAMA_SERVER, startLlamaServer, type LlamaServer } from '../helpers/llama-server.js'

// llama.cpp's own server behind the gateway: the engine that broke it three ways.

describe.skipIf(!LLAMA_SERVER)("llama.cpp's llama-server behind the gateway", () => {
  let server: LlamaServer
  let m: Market
  let client: OpenAI
  beforeAll(async () => {
    const model = thinkingModelFile()
    // Qwen3's template: a model that thinks, whose <think> the server parses out as reasoning_content.
    const template = join(tmpdir(), `svc-qwen3-${process.pid}.jinja`)
    writeFileSync(
      template,
      execFileSync('git', [
        '--git-dir',
        join(ENGINES_DIR, '.cache', 'llama.cpp.git'),
        'show',
        'HEAD:models/templates/Qwen-Qwen3-0.6B.jinja',
      ]),
    )
    server = await startLlamaServer(model, ['--jinja', '--chat-template-file', template])
    // atlas's cheaper provider is llama-server; the other stays the simulator, whose different words would show any
    // request that failed over.
    m = await engineMarket({ baseUrl: server.url, upstreamModel: 'thinker', model, providers: 1 })
    client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
  }, 60_000)
  afterAll(async () => {
    await m?.close()
    await server?.stop()
  })

  const ask = [{ role: 'user' as const, content: 'Where does the river go?' }]

  it('answers plain with its reasoning as reasoning_content, metered in the model’s tokens', async () => {
    const r = await client.chat.completions.create({ model: 'svc/atlas@1', messages: ask })
    const message = r.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }
    expect(message.content).toBe(DEFAULT_SENTENCE)
    expect(message.reasoning_content?.trim()).toBe(THOUGHT)
    expect(r.choices[0]!.finish_reason).toBe('stop')
  })

  it('serves 100 streamed requests one after another whole, each by llama-server (none failed over)', async () => {
    for (let i = 0; i < 100; i++) {
      const stream = await client.chat.completions.create({ model: 'svc/atlas@1', messages: ask, stream: true })
      let content = ''
      let reasoning = ''
      let finish: string | null = null
      for await (const c of stream) {
        const d = c.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined
        content += d?.content ?? ''
        reasoning += d?.reasoning_content ?? ''
        finish ??= c.choices[0]?.finish_reason ?? null
      }
      expect({ content, reasoning: reasoning.trim(), finish }, `request ${i}`).toEqual({
        content: DEFAULT_SENTENCE,
        reasoning: THOUGHT,
        finish: 'stop',
      })
    }
  }, 120_000)
})
