import { readFileSync } from 'node:fs'
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
 * else the byte-level BPE vocabulary of a GGUF file (a model's, or a vocab-only one), `gguf:<path>` or a path ending
 * in .gguf (metering version 2). Loaded once per file; ConfigError for one that cannot be used.
 */
export function tokenizerOf(spec: string | undefined): TokenCounter {
  if (spec === undefined || spec === 'o200k') return O200K
  let counter = loaded.get(spec)
  if (!counter) {
    counter = load(spec)
    loaded.set(spec, counter)
  }
  return counter
}

function load(spec: string): TokenCounter {
  const path = spec.startsWith('gguf:') ? spec.slice('gguf:'.length) : spec
  if (!path.toLowerCase().endsWith('.gguf'))
    throw refused(`tokenizer ${JSON.stringify(spec)}: name o200k or a GGUF file (gguf:<path> or <path>.gguf)`)
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
