#!/usr/bin/env node
// Makes a small deterministic language model, as a GGUF file llama.cpp loads, from a real tokenizer's vocabulary (the
// vocab-only GGUF files in llama.cpp's source, which node-llama-cpp ships as llama/gitRelease.bundle): a llama
// architecture of one layer and 64 dimensions whose weights, set by hand, make it a bigram machine that answers any
// chat turn with one fixed sentence and then ends its turn. Attention and the feed-forward block write nothing, so each
// position's state is its token's embedding: a token of the sentence is the unit vector of its place in it, every
// other token the vector of the start; the output row of each next token (and of the end of turn after the last)
// points at the one before it with a gain of 30, so it leads all others by 240 logits and every sampler picks it.
// No weights are fetched: the file is made in about a second.
//
// Usage: node scripts/make-model.mjs --out FILE [--sentence TEXT] [--type q4_0|q8_0|f16|f32] [--vocab qwen2]
//   [--engines DIR] (the folder whose node_modules holds node-llama-cpp; default: engines/)
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const N_EMBD = 64
const GAIN = 30
const ALIGN = 32
export const DEFAULT_SENTENCE = 'The river runs north past the stone bridge.'

// GGUF value types, ggml tensor types and llama file types.
const T = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STR: 8, ARR: 9, U64: 10, I64: 11, F64: 12 }
const GGML = { f32: 0, f16: 1, q4_0: 2, q8_0: 8 }
const FILE_TYPE = { f32: 0, f16: 1, q4_0: 2, q8_0: 7 }

/** The metadata of a GGUF file (v2 or v3): key → { type, value }, arrays as { type, items }. */
export function readGguf(b) {
  let o = 0
  const u32 = () => ((o += 4), b.readUInt32LE(o - 4))
  const u64 = () => ((o += 8), Number(b.readBigUInt64LE(o - 8)))
  const str = () => {
    const n = u64()
    return b.toString('utf8', (o += n) - n, o)
  }
  const fixed = {
    [T.U8]: [1, (at) => b.readUInt8(at)],
    [T.I8]: [1, (at) => b.readInt8(at)],
    [T.U16]: [2, (at) => b.readUInt16LE(at)],
    [T.I16]: [2, (at) => b.readInt16LE(at)],
    [T.U32]: [4, (at) => b.readUInt32LE(at)],
    [T.I32]: [4, (at) => b.readInt32LE(at)],
    [T.F32]: [4, (at) => b.readFloatLE(at)],
    [T.BOOL]: [1, (at) => b.readUInt8(at) !== 0],
    [T.U64]: [8, (at) => b.readBigUInt64LE(at)],
    [T.I64]: [8, (at) => b.readBigInt64LE(at)],
    [T.F64]: [8, (at) => b.readDoubleLE(at)],
  }
  const value = (type) => {
    if (type === T.STR) return str()
    if (type === T.ARR) {
      const items = { type: u32(), items: [] }
      for (let n = u64(); n > 0; n--) items.items.push(value(items.type))
      return items
    }
    const [size, read] = fixed[type] ?? []
    if (!read) throw new Error(`unknown GGUF value type ${type}`)
    return read((o += size) - size)
  }
  if (b.toString('latin1', 0, 4) !== 'GGUF') throw new Error('not a GGUF file')
  o = 4
  if (u32() < 2) throw new Error('GGUF before version 2')
  u64()
  const kv = new Map()
  for (let n = u64(); n > 0; n--) {
    const key = str()
    const type = u32()
    kv.set(key, { type, value: value(type) })
  }
  return kv
}

/** GGUF v3 bytes of `kv` (key → { type, value }) and `tensors` ({ name, dims, data: Float32Array, type }). */
function writeGguf(kv, tensors) {
  const parts = []
  let length = 0
  const push = (buf) => {
    parts.push(buf)
    length += buf.length
  }
  const num = (size, write) => {
    const buf = Buffer.alloc(size)
    write(buf)
    push(buf)
  }
  const u32 = (v) => num(4, (x) => x.writeUInt32LE(v))
  const u64 = (v) => num(8, (x) => x.writeBigUInt64LE(BigInt(v)))
  const str = (s) => {
    const buf = Buffer.from(s, 'utf8')
    u64(buf.length)
    push(buf)
  }
  const writers = {
    [T.U8]: (v) => num(1, (x) => x.writeUInt8(v)),
    [T.I8]: (v) => num(1, (x) => x.writeInt8(v)),
    [T.U16]: (v) => num(2, (x) => x.writeUInt16LE(v)),
    [T.I16]: (v) => num(2, (x) => x.writeInt16LE(v)),
    [T.U32]: u32,
    [T.I32]: (v) => num(4, (x) => x.writeInt32LE(v)),
    [T.F32]: (v) => num(4, (x) => x.writeFloatLE(v)),
    [T.BOOL]: (v) => num(1, (x) => x.writeUInt8(v ? 1 : 0)),
    [T.STR]: str,
    [T.U64]: u64,
    [T.I64]: (v) => num(8, (x) => x.writeBigInt64LE(BigInt(v))),
    [T.F64]: (v) => num(8, (x) => x.writeDoubleLE(v)),
    [T.ARR]: (v) => {
      u32(v.type)
      u64(v.items.length)
      for (const item of v.items) writers[v.type](item)
    },
  }
  const pad = () => {
    if (length % ALIGN) push(Buffer.alloc(ALIGN - (length % ALIGN)))
  }
  push(Buffer.from('GGUF', 'latin1'))
  u32(3)
  u64(tensors.length)
  u64(kv.size)
  for (const [key, { type, value }] of kv) {
    str(key)
    u32(type)
    writers[type](value)
  }
  const blobs = tensors.map((t) => encode(t.data, t.type))
  let offset = 0
  tensors.forEach((t, i) => {
    str(t.name)
    u32(t.dims.length)
    for (const d of t.dims) u64(d)
    u32(GGML[t.type])
    u64(offset)
    offset = Math.ceil((offset + blobs[i].length) / ALIGN) * ALIGN
  })
  pad()
  for (const blob of blobs) {
    push(blob)
    pad()
  }
  return Buffer.concat(parts, length)
}

const f32 = new Float32Array(1)
const f32Bits = new Uint32Array(f32.buffer)
/** The half-precision bits of `x` (exact for the few values these models hold: 0, 1, 30 and scales of them). */
function f16(x) {
  f32[0] = x
  const u = f32Bits[0]
  const sign = (u >>> 16) & 0x8000
  const e = ((u >>> 23) & 0xff) - 112
  if (x === 0) return sign
  if (e <= 0 || e >= 0x1f) throw new Error(`${x} has no exact half-precision form here`)
  return sign | (e << 10) | ((u & 0x7fffff) >>> 13)
}

/** `data` as ggml stores a tensor of `type` (Q8_0 and Q4_0 blocks of 32). */
function encode(data, type) {
  if (type === 'f32') return Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  if (type === 'f16') {
    const out = Buffer.alloc(data.length * 2)
    data.forEach((v, i) => out.writeUInt16LE(f16(v), i * 2))
    return out
  }
  const blocks = data.length / 32
  const block = type === 'q8_0' ? 34 : 18
  const out = Buffer.alloc(blocks * block)
  for (let i = 0; i < blocks; i++) {
    const values = data.subarray(i * 32, i * 32 + 32)
    const peak = values.reduce((m, v) => (Math.abs(v) > Math.abs(m) ? v : m), 0)
    const at = i * block
    if (type === 'q8_0') {
      const d = Math.abs(peak) / 127
      out.writeUInt16LE(f16(d), at)
      values.forEach((v, j) => out.writeInt8(d ? Math.round(v / d) : 0, at + 2 + j))
    } else {
      const d = peak / -8
      out.writeUInt16LE(f16(d), at)
      const q = (v) => Math.min(15, Math.trunc((d ? v / d : 0) + 8.5))
      for (let j = 0; j < 16; j++) out.writeUInt8(q(values[j]) | (q(values[j + 16]) << 4), at + 2 + j)
    }
  }
  return out
}

/** GPT-2's map of bytes to the characters byte-level BPE vocabularies spell them with. */
function byteChars() {
  const printable = []
  for (const [from, to] of [
    [33, 126],
    [161, 172],
    [174, 255],
  ])
    for (let b = from; b <= to; b++) printable.push(b)
  const chars = new Map(printable.map((b) => [b, String.fromCodePoint(b)]))
  let extra = 0
  for (let b = 0; b < 256; b++) if (!chars.has(b)) chars.set(b, String.fromCodePoint(256 + extra++))
  return chars
}

/** Qwen2's pre-tokenizer pattern (its case-insensitive contractions spelled out: JavaScript has no inline flags). */
const QWEN2_PRE =
  /(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu

/** The token ids of `text` in a byte-level BPE vocabulary (`tokens`, `merges` in rank order) with Qwen2's pattern. */
export function bpeEncode(text, tokens, merges) {
  const ids = new Map()
  tokens.forEach((t, i) => ids.has(t) || ids.set(t, i))
  const rank = new Map(merges.map((m, i) => [m, i]))
  const chars = byteChars()
  const out = []
  for (const piece of text.match(QWEN2_PRE) ?? []) {
    const symbols = [...Buffer.from(piece, 'utf8')].map((b) => chars.get(b))
    for (;;) {
      let best = -1
      let bestRank = Infinity
      for (let i = 0; i < symbols.length - 1; i++) {
        const r = rank.get(`${symbols[i]} ${symbols[i + 1]}`)
        if (r !== undefined && r < bestRank) [best, bestRank] = [i, r]
      }
      if (best < 0) break
      symbols.splice(best, 2, symbols[best] + symbols[best + 1])
    }
    for (const s of symbols) {
      if (!ids.has(s)) throw new Error(`token ${JSON.stringify(s)} is not in the vocabulary`)
      out.push(ids.get(s))
    }
  }
  return out
}

/** The model's GGUF bytes and the token ids of its reply, from a vocab-only GGUF's bytes. */
export function bigramModel(vocabBytes, { sentence = DEFAULT_SENTENCE, type = 'q4_0' } = {}) {
  if (!(type in GGML)) throw new Error(`--type must be one of ${Object.keys(GGML).join(', ')}`)
  const vocab = readGguf(vocabBytes)
  const tokens = vocab.get('tokenizer.ggml.tokens')?.value.items
  if (!tokens || vocab.get('tokenizer.ggml.model')?.value !== 'gpt2')
    throw new Error('the vocabulary must be a byte-level BPE one (tokenizer.ggml.model gpt2)')
  const reply = bpeEncode(sentence, tokens, vocab.get('tokenizer.ggml.merges').value.items)
  const end =
    tokens.indexOf('<|im_end|>') >= 0 ? tokens.indexOf('<|im_end|>') : vocab.get('tokenizer.ggml.eos_token_id').value
  if (reply.length < 1 || reply.length > N_EMBD - 2) throw new Error(`the sentence must be 1 to ${N_EMBD - 2} tokens`)
  if (new Set([...reply, end]).size !== reply.length + 1) throw new Error('the tokens of the sentence must differ')
  const n = tokens.length
  const embedding = new Float32Array(n * N_EMBD)
  for (let t = 0; t < n; t++) embedding[t * N_EMBD] = 1
  const output = new Float32Array(n * N_EMBD)
  reply.forEach((t, i) => {
    embedding[t * N_EMBD] = 0
    embedding[t * N_EMBD + i + 1] = 1
    output[t * N_EMBD + i] = GAIN
  })
  output[end * N_EMBD + reply.length] = GAIN
  const square = () => new Float32Array(N_EMBD * N_EMBD)
  const ones = new Float32Array(N_EMBD).fill(1)
  const tensor = (name, dims, data, t = 'f32') => ({ name, dims, data, type: t })
  const tensors = [
    tensor('token_embd.weight', [N_EMBD, n], embedding, type),
    tensor('output_norm.weight', [N_EMBD], ones),
    tensor('output.weight', [N_EMBD, n], output, type),
    tensor('blk.0.attn_norm.weight', [N_EMBD], ones),
    ...['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'].map((w) =>
      tensor(`blk.0.${w}.weight`, [N_EMBD, N_EMBD], square()),
    ),
    tensor('blk.0.ffn_norm.weight', [N_EMBD], ones),
  ]
  const kv = new Map([
    ['general.architecture', { type: T.STR, value: 'llama' }],
    ['general.name', { type: T.STR, value: 'svc-bigram' }],
    ['general.file_type', { type: T.U32, value: FILE_TYPE[type] }],
    ['general.alignment', { type: T.U32, value: ALIGN }],
    ['llama.vocab_size', { type: T.U32, value: n }],
    ['llama.context_length', { type: T.U32, value: 4096 }],
    ['llama.embedding_length', { type: T.U32, value: N_EMBD }],
    ['llama.block_count', { type: T.U32, value: 1 }],
    ['llama.feed_forward_length', { type: T.U32, value: N_EMBD }],
    ['llama.attention.head_count', { type: T.U32, value: 1 }],
    ['llama.attention.head_count_kv', { type: T.U32, value: 1 }],
    ['llama.attention.layer_norm_rms_epsilon', { type: T.F32, value: 1e-5 }],
    ['llama.rope.freq_base', { type: T.F32, value: 10000 }],
    ['llama.rope.dimension_count', { type: T.U32, value: N_EMBD }],
    ...[...vocab].filter(([key]) => key.startsWith('tokenizer.')),
  ])
  return { bytes: writeGguf(kv, tensors), reply }
}

/**
 * The path of llama.cpp's vocab-only GGUF `models/ggml-vocab-<name>.gguf`, taken out of node-llama-cpp's bundled source
 * (in `<engines>/node_modules`) into `<engines>/.cache` once.
 */
export function vocabularyFile(name, engines) {
  const file = join(engines, '.cache', `ggml-vocab-${name}.gguf`)
  if (existsSync(file)) return file
  const bundle = join(engines, 'node_modules', 'node-llama-cpp', 'llama', 'gitRelease.bundle')
  if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run npm ci in ${engines}`)
  const repo = join(engines, '.cache', 'llama.cpp.git')
  if (!existsSync(repo)) execFileSync('git', ['clone', '--quiet', '--bare', bundle, repo])
  mkdirSync(dirname(file), { recursive: true })
  const bytes = execFileSync('git', ['--git-dir', repo, 'show', `HEAD:models/ggml-vocab-${name}.gguf`], {
    maxBuffer: 64 * 1024 * 1024,
  })
  writeFileSync(file, bytes)
  return file
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values: o } = parseArgs({
    options: {
      out: { type: 'string' },
      sentence: { type: 'string', default: DEFAULT_SENTENCE },
      type: { type: 'string', default: 'q4_0' },
      vocab: { type: 'string', default: 'qwen2' },
      engines: { type: 'string', default: join(dirname(fileURLToPath(import.meta.url)), '..', 'engines') },
    },
  })
  if (!o.out) {
    console.error('usage: node scripts/make-model.mjs --out FILE [--sentence TEXT] [--type q4_0|q8_0|f16|f32]')
    process.exit(2)
  }
  const started = Date.now()
  const { bytes, reply } = bigramModel(readFileSync(vocabularyFile(o.vocab, o.engines)), o)
  writeFileSync(o.out, bytes)
  console.log(
    `${o.out}: ${(bytes.length / 1e6).toFixed(1)} MB, replies ${JSON.stringify(o.sentence)} (${reply.length} tokens), ${Date.now() - started} ms`,
  )
}
