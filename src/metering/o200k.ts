import { countTokens } from 'gpt-tokenizer/encoding/o200k_base'
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants'

/**
 * Token counts of text under o200k: the encoder's own count (gpt-tokenizer's), with two differences that are ours.
 * - Text that spells a special token (`<|endoftext|>`) is text like any other, in a message or a reply: the encoder
 *   would refuse it with an error, which made such a request fail, and such a reply go uncharged.
 * - Runs of MAX_RUN code points of one kind (below) are cut, so that no text takes more than linear time.
 * The encoder counts a text as the sum of its pre-tokens' counts (o200k's split expression cuts it into words,
 * numbers, punctuation and whitespace, each merged alone); so do we, with the count of each pre-token seen lately
 * kept in a small table. A reply's few hundred pre-tokens are then looked up there, not in the encoder's table of
 * 200,000 (whose misses in the processor's caches were most of a count under load), and a text is scanned once.
 */

/** Special tokens' text is counted as text: none is allowed as a special token, none refused. */
const AS_TEXT = { disallowedSpecial: new Set<string>() }

/**
 * o200k's split, sticky: each match is the pre-token that starts where the last one ended. A pre-token counted alone
 * splits into itself (the expression has no lookbehind, and its one lookahead, in `\s+(?!\S)`, only shortens a run of
 * whitespace that the rest of the text follows), so a text's count is the sum of its pre-tokens' counts.
 */
const PRE_TOKEN = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'uy')

/** Counts of pre-tokens seen lately: emptied when full, which a few common words then fill again. */
const HOT_LIMIT = 16_384
const hot = new Map<string, number>()

function pieceCount(piece: string): number {
  let n = hot.get(piece)
  if (n === undefined) {
    n = countTokens(piece, AS_TEXT)
    if (hot.size >= HOT_LIMIT) hot.clear()
    hot.set(piece, n)
  }
  return n
}

/** Tokens of a text without long runs: the sum of its pre-tokens' counts. */
function splitCount(text: string): number {
  let n = 0
  let at = 0
  PRE_TOKEN.lastIndex = 0
  while (at < text.length) {
    // The split matches every character; were it not to, the encoder, which skips what it does not match, counts the rest.
    if (!PRE_TOKEN.test(text) || PRE_TOKEN.lastIndex === at) return n + countTokens(text.slice(at), AS_TEXT)
    const end = PRE_TOKEN.lastIndex
    n += pieceCount(text.slice(at, end))
    at = end
  }
  return n
}

/**
 * The encoder merges each pre-token (a run of letters, of punctuation or of whitespace) in time quadratic in its
 * length: a few hundred KB of one letter blocked the event loop for minutes. Runs this long are cut into pieces of
 * this many code points, each counted alone; ordinary text has no such runs and counts exactly, a cut adds a token or two.
 */
const MAX_RUN = 64
/** A run of MAX_RUN or more letters, whitespace, or other symbols, matched from its start only (linear scan). */
const LONG_RUN = /(?<![\p{L}\p{M}])[\p{L}\p{M}]{64,}|(?<!\s)\s{64,}|(?<![^\s\p{L}\p{M}\p{N}])[^\s\p{L}\p{M}\p{N}]{64,}/gu
const PIECE = /[\s\S]{1,64}/gu

/** Whether `c` is a code unit JavaScript's `\s` matches (ECMAScript's WhiteSpace and LineTerminator). */
function isSpace(c: number): boolean {
  if (c < 0x80) return c === 32 || (c >= 9 && c <= 13)
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
}

/**
 * Whether `text` may hold a run LONG_RUN matches. Each of its runs is MAX_RUN or more code points, all of them
 * whitespace or none of them: without MAX_RUN code units of either in a row, it has none. A loop over the code units
 * is about ten times quicker than the expression, and ordinary prose never reaches the length.
 */
function mayHoldLongRun(text: string): boolean {
  let spaces = 0
  let others = 0
  for (let i = 0; i < text.length; i++) {
    if (isSpace(text.charCodeAt(i))) {
      others = 0
      if (++spaces >= MAX_RUN) return true
    } else {
      spaces = 0
      if (++others >= MAX_RUN) return true
    }
  }
  return false
}

/** Tokens of `text`, its runs of MAX_RUN code points or more cut into pieces of that many. */
function boundedCount(text: string): number {
  let n = 0
  let last = 0
  for (const m of text.matchAll(LONG_RUN)) {
    if (m.index > last) n += splitCount(text.slice(last, m.index))
    for (const [piece] of m[0].matchAll(PIECE)) n += splitCount(piece)
    last = m.index + m[0].length
  }
  return last < text.length ? n + splitCount(text.slice(last)) : n
}

/** Tokens of `text` under o200k, special tokens' text counted as text, long runs cut (above). */
export function countText(text: string): number {
  return mayHoldLongRun(text) ? boundedCount(text) : splitCount(text)
}
