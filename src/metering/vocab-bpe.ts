import type { TokenCounter } from './counter.js'

/**
 * Pre-tokenizer patterns of byte-level BPE vocabularies, by the name llama.cpp gives them (`tokenizer.ggml.pre`).
 * Case-insensitive contractions are spelled out: JavaScript has no inline flags.
 */
const CONTRACTIONS = String.raw`'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]`
export const PRE_TOKENIZERS: Readonly<Record<string, RegExp>> = {
  qwen2: new RegExp(
    String.raw`(?:${CONTRACTIONS})|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
    'gu',
  ),
  'llama-bpe': new RegExp(
    String.raw`(?:${CONTRACTIONS})|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
    'gu',
  ),
  'gpt-2': /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu,
}

/**
 * A pre-token longer than this is merged in pieces of this length: a merge costs the square of its length here, and no
 * word of any language is this long (such a piece may count a token or so differently from the engine's own).
 */
const MAX_PIECE = 256
/** Counts of pre-tokens seen lately: emptied when full, which common words then fill again. */
const PIECE_CACHE = 16_384

/** GPT-2's map of bytes to the characters byte-level vocabularies spell them with. */
function byteChars(): string[] {
  const chars: string[] = new Array<string>(256)
  let extra = 0
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)
    chars[b] = String.fromCodePoint(printable ? b : 256 + extra++)
  }
  return chars
}
const BYTE_CHARS = byteChars()

/** `s` as a string of its own, not a view into the text it was cut from (which a cache key would keep alive). */
const ownCopy = (s: string): string => (s.length < 13 ? s : ` ${s}`.slice(1))

/**
 * Token counts in a model's own byte-level BPE vocabulary (Qwen's, Llama 3's, GPT-2's): the text split by the
 * vocabulary's pre-tokenizer, each piece's bytes merged by the vocabulary's merge ranks. Text that spells a special
 * token counts as text, as under o200k.
 */
export class VocabCounter implements TokenCounter {
  readonly meteringVersion = 2
  private readonly ranks = new Map<string, number>()
  private readonly cache = new Map<string, number>()

  constructor(
    readonly name: string,
    merges: readonly string[],
    private readonly pattern: RegExp,
  ) {
    merges.forEach((m, rank) => this.ranks.set(m, rank))
  }

  count(text: string, stopAbove = Infinity): number {
    let n = 0
    for (const m of text.matchAll(this.pattern)) if ((n += this.pieceCount(m[0])) > stopAbove) break
    return n
  }

  private pieceCount(piece: string): number {
    if (piece.length > MAX_PIECE) {
      let n = 0
      for (let i = 0; i < piece.length; i += MAX_PIECE) n += this.pieceCount(piece.slice(i, i + MAX_PIECE))
      return n
    }
    let n = this.cache.get(piece)
    if (n === undefined) {
      n = this.merged(piece)
      if (this.cache.size >= PIECE_CACHE) this.cache.clear()
      this.cache.set(ownCopy(piece), n)
    }
    return n
  }

  /** The tokens of one piece: its bytes' characters, the lowest-ranked pair merged until none is in the vocabulary. */
  private merged(piece: string): number {
    const symbols = [...Buffer.from(piece, 'utf8')].map((b) => BYTE_CHARS[b]!)
    for (;;) {
      let best = -1
      let bestRank = Infinity
      for (let i = 0; i < symbols.length - 1; i++) {
        const rank = this.ranks.get(`${symbols[i]} ${symbols[i + 1]}`)
        if (rank !== undefined && rank < bestRank) {
          best = i
          bestRank = rank
        }
      }
      if (best < 0) return symbols.length
      symbols.splice(best, 2, symbols[best]! + symbols[best + 1]!)
    }
  }
}
