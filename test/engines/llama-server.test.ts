import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { once } from 'node:events'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ENGINES_DIR } from '../../src/engine/node-llama.js'
import type { Market } from '../helpers/market.js'
import { DEFAULT_SENTENCE, engineMarket, ENGINE_INSTALLED, THOUGHT, thinkingModelFile } from '../helpers/engine.js'

// llama.cpp's own server, built from the source node-llama-cpp ships (scripts/build-llama-server.mjs, cached outside
// the checkout): the engine that broke the gateway three ways. These tests skip when it has not been built.

function builtServer(): string | undefined {
  if (!ENGINE_INSTALLED) return undefined
  try {
    const args = ['scripts/build-llama-server.mjs', '--check', '--engines', ENGINES_DIR]
    const path = execFileSync(process.execPath, args, { encoding: 'utf8' }).trim()
    return existsSync(path) ? path : undefined
  } catch {
    return undefined
  }
}
const binary = builtServer()

/** A port nothing listens on now (the server is told to take it). */
async function freePort(): Promise<number> {
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const { port } = probe.address() as AddressInfo
  await new Promise((resolve) => probe.close(resolve))
  return port
}

describe.skipIf(!binary)("llama.cpp's llama-server behind the gateway", () => {
  let server: ChildProcess
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
    const port = await freePort()
    const args = ['-m', model, '--host', '127.0.0.1', '--port', String(port), '-c', '4096', '-np', '2', '-t', '1']
    server = spawn(binary!, [...args, '--jinja', '--chat-template-file', template], { stdio: 'ignore' })
    const url = `http://127.0.0.1:${port}`
    for (let i = 0; i < 300; i++) {
      const up = await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      )
      if (up) break
      await new Promise((r) => setTimeout(r, 100))
    }
    // atlas's cheaper provider is llama-server; the other stays the simulator, whose different words would show any
    // request that failed over.
    m = await engineMarket({ baseUrl: `${url}/v1`, upstreamModel: 'thinker', model, providers: 1 })
    client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
  }, 60_000)
  afterAll(async () => {
    await m?.close()
    if (server && server.exitCode === null) {
      server.kill()
      await once(server, 'exit')
    }
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
