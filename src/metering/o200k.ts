import { countTokens } from 'gpt-tokenizer/encoding/o200k_base'
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants'

/**
 * Token counts of text under o200k: the encoder's own count (gpt-tokenizer's), with two differences that are ours.
 * - Text that spells a special token (`<|endoftext|>`) is text like any other, in a message or a reply: the encoder
 *   would refuse it with an error, which made such a request fail, and such a reply go uncharged.
 * - A pre-token longer than MAX_PIECE code units is cut into pieces of that many, each counted alone. The encoder
 *   merges a pre-token in time quadratic in its length: a few hundred KB of one letter, or of a symbol and a
 *   combining mark in turn, blocked the event loop for minutes. Ordinary text has no such pre-tokens and counts
 *   exactly; a cut adds a token or two.
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
 * whitespace that the rest of the text follows), so a text's count is the sum of its pre-tokens' counts. It matches
 * every code point, so each match moves on.
 */
const PRE_TOKEN = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'uy')

const MAX_PIECE = 64

/** Counts of pre-tokens seen lately: emptied when full, which a few common words then fill again. */
const HOT_LIMIT = 16_384
const hot = new Map<string, number>()

function pieceCount(piece: string): number {
  let n = hot.get(piece)
  if (n === undefined) {
    const own = ownCopy(piece)
    n = countTokens(own, AS_TEXT)
    if (hot.size >= HOT_LIMIT) hot.clear()
    hot.set(own, n)
  }
  return n
}

/**
 * `s` as a string of its own. V8 makes a slice of 13 characters or more a view into the whole text it was cut from:
 * kept as a key, here or in the encoder's own cache of merges (100,000 pre-tokens), it would keep that prompt or
 * reply, up to the body limit, for as long as the key lives. Joined to a character and cut again, it is first copied.
 */
const ownCopy = (s: string): string => (s.length < 13 ? s : ` ${s}`.slice(1))

/** A long pre-token's tokens: its pieces of MAX_PIECE code units (never between a surrogate pair's halves), each alone. */
function cutCount(preToken: string): number {
  let n = 0
  for (let at = 0; at < preToken.length; ) {
    let end = Math.min(at + MAX_PIECE, preToken.length)
    if (end < preToken.length && isLowSurrogate(preToken.charCodeAt(end))) end--
    n += countTokens(ownCopy(preToken.slice(at, end)), AS_TEXT)
    at = end
  }
  return n
}

const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff

/** Tokens of `text` under o200k, special tokens' text counted as text, long pre-tokens cut (above). */
export function countText(text: string): number {
  let n = 0
  let at = 0
  PRE_TOKEN.lastIndex = 0
  while (at < text.length) {
    // The split matches every code point (above), so this never happens; were it to, the rest is counted in pieces.
    if (!PRE_TOKEN.test(text) || PRE_TOKEN.lastIndex === at) return n + cutCount(text.slice(at))
    const end = PRE_TOKEN.lastIndex
    n += end - at <= MAX_PIECE ? pieceCount(text.slice(at, end)) : cutCount(text.slice(at, end))
    at = end
  }
  return n
}
