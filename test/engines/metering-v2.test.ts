import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ggufMetadata } from '../../src/metering/gguf.js'
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

  it('counts the same from a Hugging Face tokenizer.json of the same vocabulary', () => {
    const merges = ggufMetadata(readFileSync(modelFile())).get('tokenizer.ggml.merges') as string[]
    const path = join(mkdtempSync(join(tmpdir(), 'svc-hf-')), 'tokenizer.json')
    const Regex = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    const pre = [
      { type: 'Split', pattern: { Regex }, behavior: 'Isolated' },
      { type: 'ByteLevel', use_regex: false },
    ]
    writeFileSync(
      path,
      JSON.stringify({
        model: { type: 'BPE', vocab: {}, merges: merges.map((m) => m.split(' ')) },
        pre_tokenizer: { type: 'Sequence', pretokenizers: pre },
      }),
    )
    const counter = tokenizerOf(path)
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
