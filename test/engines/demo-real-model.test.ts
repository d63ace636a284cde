import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { describe, expect, it } from 'vitest'
import { daemon } from '../helpers/cli.js'
import { DEFAULT_SENTENCE, ENGINE_INSTALLED } from '../helpers/engine.js'

describe.skipIf(!ENGINE_INSTALLED)('the demo with node-llama-cpp installed in engines/', () => {
  it('serves a real model beside the simulated ones, metered in its own tokens; --no-real-model leaves it out', async () => {
    const data = mkdtempSync(join(tmpdir(), 'svc-demo-real-'))
    const d = await daemon(['demo', '--port', '0', '--data', data, '--json'], /\n/)
    try {
      const line = JSON.parse(d.output().split('\n')[0]!)
      expect(line.real_model).toMatchObject({ id: 'svc/bigram@1', engine_url: expect.stringMatching(/\/v1$/) })
      const client = new OpenAI({ baseURL: `${line.base_url}/v1`, apiKey: line.api_key, maxRetries: 0 })
      const r = await client.chat.completions.create({
        model: 'svc/bigram@1',
        messages: [{ role: 'user', content: 'Hello!' }],
      })
      expect(r.choices[0]!.message.content).toBe(DEFAULT_SENTENCE)
      // Its nine tokens in Qwen2's vocabulary, the model's own.
      expect(r.usage!.completion_tokens).toBe(9)
    } finally {
      await d.stop()
    }
    const without = await daemon(['demo', '--port', '0', '--data', data, '--json', '--no-real-model'], /\n/)
    try {
      expect(JSON.parse(without.output().split('\n')[0]!).real_model).toBeUndefined()
    } finally {
      await without.stop()
    }
  }, 60_000)
})
