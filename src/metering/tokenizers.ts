import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { ConfigError } from '../config.js'
import type { TokenCounter } from './counter.js'
import { GgufError, ggufMetadata } from './gguf.js'
import { O200K } from './tokens.js'
import { PRE_TOKENIZERS, VocabCounter } from './vocab-bpe.js'

const loaded = new Map<string, TokenCounter>()

/** A model's tokenizer that cannot be used: a config problem, said at start. */
const refused = (why: string) => new ConfigError([`a model's tokenizer: ${why}`], '(models[].tokenizer)')

/**
 * The tokenizer a model names (`tokenizer` in its config): o200k when it names none or `o200k` (metering version 1);
 * else `cl100k` (GPT-4's and GPT-3.5's) or the byte-level BPE vocabulary of a GGUF file (a model's, or a vocab-only
 * one), `gguf:<path>` or a path ending in .gguf (metering version 2). Loaded once; ConfigError for one that cannot be
 * used.
 */
export function tokenizerOf(spec: string | undefined): TokenCounter {
  if (spec === undefined || spec === 'o200k') return O200K
  if (spec === 'cl100k') return (cl100k ??= cl100kCounter())
  let counter = loaded.get(spec)
  if (!counter) {
    counter = load(spec)
    loaded.set(spec, counter)
  }
  return counter
}

let cl100k: TokenCounter | undefined

/** Code units of a text cl100k counts at once; a longer one is counted a slice at a time, up to past `stopAbove`. */
const CL100K_SLICE = 65_536

/**
 * cl100k through gpt-tokenizer, loaded only for a model that names it (its ranks are megabytes); text that spells a
 * special token counts as text, as under o200k.
 */
function cl100kCounter(): TokenCounter {
  const { countTokens } = createRequire(import.meta.url)('gpt-tokenizer/encoding/cl100k_base') as {
    countTokens(text: string, options: { disallowedSpecial: Set<string> }): number
  }
  const asText = { disallowedSpecial: new Set<string>() }
  return {
    name: 'cl100k',
    meteringVersion: 2,
    count(text, stopAbove = Infinity) {
      if (text.length <= CL100K_SLICE) return countTokens(text, asText)
      let n = 0
      for (let i = 0; i < text.length && n <= stopAbove; i += CL100K_SLICE)
        n += countTokens(text.slice(i, i + CL100K_SLICE), asText)
      return n
    },
  }
}

function load(spec: string): TokenCounter {
  if (spec.toLowerCase().endsWith('.json')) return loadTokenizerJson(spec)
  const path = spec.startsWith('gguf:') ? spec.slice('gguf:'.length) : spec
  if (!path.toLowerCase().endsWith('.gguf'))
    throw refused(
      `tokenizer ${JSON.stringify(spec)}: name o200k, cl100k, a GGUF file (gguf:<path> or <path>.gguf) or a tokenizer.json`,
    )
  let meta
  try {
    meta = ggufMetadata(readFileSync(path))
  } catch (err) {
    const why = err instanceof GgufError ? err.message : ((err as NodeJS.ErrnoException).code ?? String(err))
    throw refused(`tokenizer ${path}: ${why}`)
  }
  const model = meta.get('tokenizer.ggml.model')
  if (model !== 'gpt2')
    throw refused(`tokenizer ${path}: only byte-level BPE vocabularies (gpt2) are metered, not ${String(model)}`)
  const pre = String(meta.get('tokenizer.ggml.pre') ?? 'gpt-2')
  const pattern = PRE_TOKENIZERS[pre === 'default' ? 'gpt-2' : pre]
  if (!pattern)
    throw refused(
      `tokenizer ${path}: its pre-tokenizer ${pre} is not known (${Object.keys(PRE_TOKENIZERS).join(', ')})`,
    )
  const merges = meta.get('tokenizer.ggml.merges')
  if (!Array.isArray(merges) || !merges.every((m) => typeof m === 'string'))
    throw refused(`tokenizer ${path}: it has no merges`)
  return new VocabCounter(path, merges as string[], pattern)
}

/** JavaScript has no inline flags: the case-insensitive contractions of Hugging Face's patterns, spelled out. */
const INLINE_CONTRACTIONS = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
const SPELLED_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

interface TokenizerJson {
  model?: { type?: string; merges?: unknown[] }
  pre_tokenizer?: PreTokenizer | null
}
interface PreTokenizer {
  type?: string
  pretokenizers?: PreTokenizer[]
  pattern?: { Regex?: string; String?: string }
  use_regex?: boolean
}

/**
 * A Hugging Face `tokenizer.json` of a byte-level BPE model: its merges, and its pre-tokenizer's split pattern (a
 * `Split` with a regex, or GPT-2's when a `ByteLevel` splits by its own).
 */
function loadTokenizerJson(path: string): TokenCounter {
  let json: TokenizerJson
  try {
    json = JSON.parse(readFileSync(path, 'utf8')) as TokenizerJson
  } catch (err) {
    const why = err instanceof SyntaxError ? 'not JSON' : ((err as NodeJS.ErrnoException).code ?? String(err))
    throw refused(`tokenizer ${path}: ${why}`)
  }
  if (json.model?.type !== 'BPE' || !Array.isArray(json.model.merges))
    throw refused(`tokenizer ${path}: only BPE models with merges are metered`)
  const merges = json.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m))
  if (!merges.every((m) => typeof m === 'string')) throw refused(`tokenizer ${path}: its merges are not pairs`)
  const steps =
    json.pre_tokenizer?.type === 'Sequence' ? (json.pre_tokenizer.pretokenizers ?? []) : [json.pre_tokenizer]
  const split = steps.find((p) => p?.type === 'Split' && typeof p.pattern?.Regex === 'string')
  const byteLevel = steps.find((p) => p?.type === 'ByteLevel')
  if (!byteLevel) throw refused(`tokenizer ${path}: only byte-level BPE vocabularies are metered`)
  let pattern: RegExp
  if (split) {
    try {
      pattern = new RegExp(split.pattern!.Regex!.replaceAll(INLINE_CONTRACTIONS, SPELLED_CONTRACTIONS), 'gu')
    } catch {
      throw refused(`tokenizer ${path}: its split pattern is not one JavaScript can run`)
    }
  } else if (byteLevel.use_regex !== false) pattern = PRE_TOKENIZERS['gpt-2']!
  else throw refused(`tokenizer ${path}: it names no pre-tokenizer split`)
  return new VocabCounter(path, merges as string[], pattern)
}
