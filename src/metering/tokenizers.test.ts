import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../config.js'
import { tokenizerOf } from './tokenizers.js'
import { O200K } from './tokens.js'

/** A vocab-only GGUF (v3) of these metadata: strings, and arrays of strings. */
function gguf(kv: Record<string, string | string[]>): Buffer {
  const parts: Buffer[] = []
  const u32 = (v: number) => parts.push(Buffer.from(new Uint32Array([v]).buffer))
  const u64 = (v: number) => parts.push(Buffer.from(new BigUint64Array([BigInt(v)]).buffer))
  const str = (s: string) => {
    u64(Buffer.byteLength(s))
    parts.push(Buffer.from(s))
  }
  parts.push(Buffer.from('GGUF'))
  u32(3)
  u64(0)
  u64(Object.keys(kv).length)
  for (const [key, value] of Object.entries(kv)) {
    str(key)
    if (typeof value === 'string') {
      u32(8)
      str(value)
    } else {
      u32(9)
      u32(8)
      u64(value.length)
      value.forEach(str)
    }
  }
  return Buffer.concat(parts)
}

const dir = mkdtempSync(join(tmpdir(), 'svc-vocab-'))
function file(name: string, bytes: Buffer | string): string {
  const path = join(dir, name)
  writeFileSync(path, bytes)
  return path
}

/** GPT-2's spelling of a space is Ġ. */
const MERGES = ['t h', 'th e', 'Ġ the']

describe("a model's own tokenizer", () => {
  it('is o200k when the model names none, or o200k', () => {
    expect(tokenizerOf(undefined)).toBe(O200K)
    expect(tokenizerOf('o200k')).toBe(O200K)
    expect(O200K.meteringVersion).toBe(1)
  })

  it('is cl100k by name, counting as gpt-tokenizer does, a spelled special token as text', async () => {
    const { countTokens, encode } = await import('gpt-tokenizer/encoding/cl100k_base')
    const counter = tokenizerOf('cl100k')
    expect(counter.meteringVersion).toBe(2)
    for (const text of ['Hello, world!', 'def f(x):\n    return x ** 2\n', '你好，世界', ''])
      expect(counter.count(text)).toBe(countTokens(text))
    const special = 'a <|endoftext|> b'
    expect(counter.count(special)).toBe(encode(special, { disallowedSpecial: new Set() }).length)
    expect(counter.count(special)).toBeGreaterThan(3)
    // A long text is counted a slice at a time, and no further than past stopAbove.
    expect(counter.count('word '.repeat(40_000), 100)).toBeLessThan(20_000)
  })

  it("counts by the vocabulary's merges, its pre-tokenizer splitting the text", () => {
    const path = file('tiny.gguf', gguf({ 'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.merges': MERGES }))
    const counter = tokenizerOf(`gguf:${path}`)
    expect(counter.meteringVersion).toBe(2)
    // "the" and " the" merge whole; "then": the, n; a space alone and "x": one byte each.
    expect(counter.count('the the')).toBe(2)
    expect(counter.count('then')).toBe(2)
    expect(counter.count(' x')).toBe(2)
    const fewer = file(
      'fewer.gguf',
      gguf({ 'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.merges': MERGES.slice(0, 2) }),
    )
    expect(tokenizerOf(fewer).count('the the')).toBe(3)
    // Loaded once: the same counter for the same file.
    expect(tokenizerOf(`gguf:${path}`)).toBe(counter)
  })

  it("reads a Hugging Face tokenizer.json: its merges, as strings or pairs, and its pre-tokenizer's split", () => {
    const json = (merges: unknown[], pre: unknown) =>
      JSON.stringify({ model: { type: 'BPE', vocab: {}, merges }, pre_tokenizer: pre })
    const qwen2Split = {
      type: 'Sequence',
      pretokenizers: [
        {
          type: 'Split',
          pattern: {
            Regex: String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
          },
          behavior: 'Isolated',
        },
        { type: 'ByteLevel', add_prefix_space: false, use_regex: false },
      ],
    }
    const strings = tokenizerOf(file('strings.json', json(MERGES, qwen2Split)))
    expect(strings.count('the the')).toBe(2)
    // Its (?i:…) contractions, which JavaScript cannot compile, are spelled out: "'S" is one piece, of two bytes.
    expect(strings.count("THE'S")).toBe(5)
    const pairs = tokenizerOf(
      file(
        'pairs.json',
        json(
          MERGES.map((m) => m.split(' ')),
          { type: 'ByteLevel' },
        ),
      ),
    )
    expect(pairs.count('the the')).toBe(2)
    const refused = (name: string, text: string) => {
      try {
        tokenizerOf(file(name, text))
      } catch (err) {
        return (err as ConfigError).problems[0]
      }
      throw new Error(`${name} was taken`)
    }
    expect(refused('wordpiece.json', JSON.stringify({ model: { type: 'WordPiece' } }))).toMatch(/only BPE models/)
    expect(refused('spm.json', json(MERGES, { type: 'Metaspace' }))).toMatch(/only byte-level BPE/)
    expect(refused('broken.json', '{"model":')).toMatch(/broken\.json: not JSON/)
  })

  it('refuses what it cannot meter, in words that name the file', () => {
    const refused = (spec: string) => {
      try {
        tokenizerOf(spec)
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError)
        return (err as ConfigError).problems[0]
      }
      throw new Error(`${spec} was taken`)
    }
    expect(refused('p50k')).toMatch(/name o200k, cl100k, a GGUF file .* or a tokenizer\.json/)
    expect(refused(join(dir, 'missing.gguf'))).toMatch(/missing\.gguf: ENOENT/)
    expect(refused(file('text.gguf', 'not gguf at all, just text'))).toMatch(/not a GGUF file/)
    expect(refused(file('cut.gguf', gguf({ 'tokenizer.ggml.model': 'gpt2' }).subarray(0, 30)))).toMatch(
      /ends inside its metadata/,
    )
    expect(refused(file('spm.gguf', gguf({ 'tokenizer.ggml.model': 'llama' })))).toMatch(/not llama/)
    const odd = gguf({ 'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.pre': 'klingon', 'tokenizer.ggml.merges': [] })
    expect(refused(file('odd.gguf', odd))).toMatch(/pre-tokenizer klingon is not known \(qwen2, llama-bpe, gpt-2\)/)
    expect(refused(file('none.gguf', gguf({ 'tokenizer.ggml.model': 'gpt2' })))).toMatch(/no merges/)
  })
})

describe('a model that names its tokenizer, in the config', () => {
  it('needs metering_version 2 in its tool contract, and one metered in o200k version 1', async () => {
    const { validateConfig } = await import('../config.js')
    const { DEMO_CONTRACTS } = await import('../cli/demo/market.js')
    const model = (over: Record<string, unknown>) => ({
      id: 'svc/q@1',
      owned_by: 'q',
      contextLimit: 4096,
      capabilities: {
        workload: 'chat',
        tools: true,
        structuredOutputs: true,
        reasoning: false,
        streaming: true,
        maxOutputTokens: 1024,
      },
      tool_contract: DEMO_CONTRACTS.atlas,
      ...over,
    })
    const config = (m: Record<string, unknown>) => ({
      listen: { host: '127.0.0.1', port: 0 },
      store: 'sqlite::memory:',
      rail: { kind: 'local' },
      models: [m],
      providers: [],
      feeBps: 0,
    })
    const problems = (m: Record<string, unknown>) => {
      try {
        validateConfig(config(m))
        return []
      } catch (err) {
        return (err as ConfigError).problems
      }
    }
    expect(problems(model({}))).toEqual([])
    expect(problems(model({ tokenizer: 'gguf:q.gguf' }))).toEqual([
      'models[0].tool_contract.metering_version: 2 for a model that names its tokenizer, not 1',
    ])
    const v2 = { ...DEMO_CONTRACTS.atlas, metering_version: 2 }
    expect(problems(model({ tokenizer: 'gguf:q.gguf', tool_contract: v2 }))).toEqual([])
    expect(problems(model({ tool_contract: v2 }))).toEqual([
      'models[0].tool_contract.metering_version: 1 for a model metered in o200k, not 2',
    ])
  })
})
