#!/usr/bin/env node
// Makes a small deterministic language model, as a GGUF file llama.cpp loads, from a real tokenizer's vocabulary (the
// vocab-only GGUF files in llama.cpp's source, which node-llama-cpp ships as llama/gitRelease.bundle): a llama
// architecture of one layer and 64 dimensions whose weights, set by hand, make it a bigram machine that answers any
// chat turn with one fixed sentence and then ends its turn. Attention and the feed-forward block write nothing, so each
// position's state is its token's embedding: a token of the sentence is the unit vector of its place in it, every
// other token the vector of the start; the output row of each next token (and of the end of turn after the last)
// points at the one before it with a gain of 30, so it leads all others by 240 logits and every sampler picks it.
// Under a grammar that forbids the next token (JSON asked for, a tool call's arguments), the closers `"`, `}` and `]`
// lead the others by a little, so every string, object and array the grammar opens ends at once.
// No weights are fetched: the file is made in about a second.
//
// Usage: node scripts/make-model.mjs --out FILE [--sentence TEXT] [--type q4_0|q8_0|f16|f32] [--vocab qwen2]
//   [--think TEXT] (a reasoning model: it thinks TEXT between <think> and </think> first)
//   [--template NAME] (llama.cpp's models/templates/NAME.jinja as its chat template, e.g. Qwen-Qwen3-0.6B)
//   [--engines DIR] (the folder whose node_modules holds node-llama-cpp; default: engines/)
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { ALIGN, FILE_TYPE, GGML, readGguf, T, writeGguf } from './gguf.mjs'

const N_EMBD = 64
const GAIN = 30
/** The closers' leads under a grammar (a tenth of the next token's at most, so they never matter outside one), `"`
 *  first: inside a string every closer is allowed, and the string is what must end. */
const CLOSER_GAINS = { '"': 3, '}': 2, ']': 1 }
export const DEFAULT_SENTENCE = 'The river runs north past the stone bridge.'

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
export function bigramModel(vocabBytes, { sentence = DEFAULT_SENTENCE, type = 'q4_0', think, template } = {}) {
  if (!(type in GGML)) throw new Error(`--type must be one of ${Object.keys(GGML).join(', ')}`)
  const vocab = readGguf(vocabBytes)
  const tokens = [...(vocab.get('tokenizer.ggml.tokens')?.value.items ?? [])]
  if (!tokens.length || vocab.get('tokenizer.ggml.model')?.value !== 'gpt2')
    throw new Error('the vocabulary must be a byte-level BPE one (tokenizer.ggml.model gpt2)')
  const merges = vocab.get('tokenizer.ggml.merges').value.items
  let reply = bpeEncode(sentence, tokens, merges)
  // The vocabulary's unused (padding) tokens, renamed to the marks a model trained to think or call tools has.
  const unused = tokens.flatMap((t, i) => (t.startsWith('[PAD') ? [i] : []))
  const mark = (name) => {
    const id = unused.shift()
    if (id === undefined) throw new Error(`the vocabulary has no unused token left to name ${name}`)
    tokens[id] = name
    vocab.set('tokenizer.ggml.tokens', { type: T.ARR, value: { type: T.STR, items: tokens } })
    return id
  }
  if (think !== undefined) {
    const [open, close] = [mark('<think>'), mark('</think>')]
    reply = [open, ...bpeEncode(think, tokens, merges), close, ...reply]
  }
  if (template !== undefined) vocab.set('tokenizer.chat_template', { type: T.STR, value: template })
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
  for (const [closer, gain] of Object.entries(CLOSER_GAINS)) {
    const row = tokens.indexOf(closer) * N_EMBD
    for (let d = 0; d < N_EMBD; d++) output[row + d] = Math.max(output[row + d], gain)
  }
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

/** llama.cpp's chat template `models/templates/<name>.jinja` (e.g. Qwen-Qwen3-0.6B), from the same source. */
export function chatTemplate(name, engines) {
  vocabularyFile('qwen2', engines)
  const repo = join(engines, '.cache', 'llama.cpp.git')
  return execFileSync('git', ['--git-dir', repo, 'show', `HEAD:models/templates/${name}.jinja`], { encoding: 'utf8' })
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values: o } = parseArgs({
    options: {
      out: { type: 'string' },
      sentence: { type: 'string', default: DEFAULT_SENTENCE },
      type: { type: 'string', default: 'q4_0' },
      vocab: { type: 'string', default: 'qwen2' },
      engines: { type: 'string', default: join(dirname(fileURLToPath(import.meta.url)), '..', 'engines') },
      think: { type: 'string' },
      template: { type: 'string' },
    },
  })
  if (!o.out) {
    console.error('usage: node scripts/make-model.mjs --out FILE [--sentence TEXT] [--type q4_0|q8_0|f16|f32]')
    process.exit(2)
  }
  const started = Date.now()
  const template = o.template === undefined ? undefined : chatTemplate(o.template, o.engines)
  const { bytes, reply } = bigramModel(readFileSync(vocabularyFile(o.vocab, o.engines)), { ...o, template })
  writeFileSync(o.out, bytes)
  console.log(
    `${o.out}: ${(bytes.length / 1e6).toFixed(1)} MB, replies ${JSON.stringify(o.sentence)} (${reply.length} tokens), ${Date.now() - started} ms`,
  )
}
