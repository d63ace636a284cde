import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadNodeLlamaCpp, type LlamaModel } from '../../src/engine/node-llama.js'
import { tokenizerOf } from '../../src/metering/tokenizers.js'
import { ENGINE_INSTALLED, modelFile } from '../helpers/engine.js'

// Metering version 2 counts a model's tokens in its own vocabulary: the same counts as the engine's own tokenizer
// (llama.cpp's, through node-llama-cpp) over Qwen2's real vocabulary.

const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  "I'll say it's done, don't you think? We've THEY'RE",
  'function add(a, b) {\n  return a + b // sum\n}\n',
  '{"city":"Paris","unit":"celsius","temps":[12.5,-3,1e9]}',
  'Order 1234567890 shipped on 2026-12-02 at 14:05:59.',
  '你好，世界！今天天气很好。',
  'Привет, мир. Ελληνικά κείμενα.',
  'emoji 😀🎉👍🏽 and symbols ©®™ → ≠ ∑',
  '   leading spaces\n\n\ttabs\r\nand CRLF   \n',
  'https://example.com/path?query=1&b=2#frag',
  'spelled special tokens: <|im_start|>user <|im_end|> <|endoftext|>',
  'a'.repeat(700),
  'word '.repeat(300),
  '',
]

describe.skipIf(!ENGINE_INSTALLED)('a model’s own tokenizer (metering version 2)', () => {
  let model: LlamaModel
  let dispose: () => Promise<void>
  beforeAll(async () => {
    const lib = await loadNodeLlamaCpp()
    const llama = await lib.getLlama({ gpu: false, build: 'never', logLevel: 'error' })
    model = await llama.loadModel({ modelPath: modelFile() })
    dispose = async () => {
      await model.dispose()
      await llama.dispose()
    }
  }, 60_000)
  afterAll(() => dispose?.())

  it('counts every text as the engine tokenizes it', () => {
    const counter = tokenizerOf(modelFile())
    expect(counter.meteringVersion).toBe(2)
    for (const text of TEXTS)
      expect(counter.count(text), JSON.stringify(text.slice(0, 40))).toBe(model.tokenize(text).length)
  })

  it('stops counting past stopAbove, having counted more than it', () => {
    const counter = tokenizerOf(modelFile())
    const long = 'word '.repeat(1000)
    const n = counter.count(long, 10)
    expect(n).toBeGreaterThan(10)
    expect(n).toBeLessThan(20)
  })
})
