import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants'
import { MAX_MERGED, preTokenCount } from './bpe.js'

/**
 * Token counts of text under o200k: gpt-tokenizer's count, except that text spelling a special token counts as text,
 * and that pre-tokens past MAX_MERGED and stretches without a cut in SEGMENT_UNITS / 2 are cut (a count may then move
 * by a token or two). Why, and how it stays exact elsewhere: docs/architecture.md §15.9.
 */

/**
 * o200k's split, sticky: each match is the pre-token that starts where the last one ended. It matches every code point,
 * and a text's count is the sum of its pre-tokens' counts (docs/architecture.md §15.9).
 */
const PRE_TOKEN = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'uy')

/** Pre-tokens this long or shorter have their counts remembered. */
const HOT_PIECE = 64
/** Counts of pre-tokens seen lately: emptied when full, which a few common words then fill again. */
const HOT_LIMIT = 16_384
const hot = new Map<string, number>()

const pieceCount = (piece: string): number => remembered(hot, HOT_LIMIT, piece)

/** The count of `piece`, from `counts` or merged and kept there (`counts` emptied first when it holds `limit`). */
function remembered(counts: Map<string, number>, limit: number, piece: string): number {
  let n = counts.get(piece)
  if (n === undefined) {
    n = preTokenCount(piece)
    if (counts.size >= limit) counts.clear()
    counts.set(ownCopy(piece), n)
  }
  return n
}

/**
 * `s` as a string of its own. V8 makes a slice of 13 characters or more a view into the whole text it was cut from:
 * kept as a key it would keep that prompt or reply, up to the body limit, for as long as the key lives. Joined to a
 * character and cut again, it is first copied.
 */
const ownCopy = (s: string): string => (s.length < 13 ? s : ` ${s}`.slice(1))

/**
 * Counts of long pre-tokens' pieces seen lately. A long pre-token is nearly always a run of one character (spaces, `=`,
 * `-`) whose pieces are all alike: each is merged once, not once per piece and per request. Emptied when full.
 */
const LONG_LIMIT = 1024
const long = new Map<string, number>()

const longPieceCount = (piece: string): number => remembered(long, LONG_LIMIT, piece)

const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff

/**
 * Tokens of `text` under o200k, special tokens' text counted as text, long pre-tokens cut (above). Past `stopAbove`
 * it stops: the count returned is then more than that, and may be less than the text's.
 */
export function countText(text: string, stopAbove = Infinity): number {
  const count = new TextCount(text, stopAbove)
  count.step(Infinity)
  return count.n
}

/**
 * A count of one text that can pause and go on, to the count `countText` gives. Some texts of a few MB take seconds
 * to count (letters without a space, CJK at random): counted a step at a time, with other requests served between
 * steps, they no longer stall every request in flight for that long.
 */
export class TextCount {
  /** Tokens counted so far: the text's count once `done`. */
  n = 0
  /** Where the count goes on: a pre-token's start, or the start of a long pre-token's next piece. */
  private at = 0
  /** The end of the pre-token `at` is in; `at` itself between pre-tokens. */
  private end = 0
  /** The stretch of the text the split reads (`segmentFrom`), from `segmentStart` to `segmentEnd`. */
  private segment = ''
  private segmentStart = 0
  private segmentEnd = 0

  constructor(
    private readonly text: string,
    /** Past this many tokens the count stops: it is then more than that, and may be less than the text's. */
    private readonly stopAbove = Infinity,
  ) {}

  /** Code units counted so far. */
  get position(): number {
    return this.at
  }

  get done(): boolean {
    return this.at >= this.text.length || this.n > this.stopAbove
  }

  /**
   * Counts on over at least `units` more code units (a pre-token or a long one's piece is counted whole), or to the
   * end. Returns whether the count is done.
   */
  step(units: number): boolean {
    const { text, stopAbove } = this
    const until = this.at + units
    let { at, end, n } = this
    while (at < text.length && at < until && n <= stopAbove) {
      if (at === end) {
        if (at === this.segmentEnd) this.segmentFrom(at)
        const from = this.segmentStart
        // Set each time: another count may have used the expression between this one's steps.
        PRE_TOKEN.lastIndex = at - from
        // The split matches every code point (above), so the rest never goes unmatched; were it to, it is counted in
        // pieces.
        end =
          PRE_TOKEN.test(this.segment) && PRE_TOKEN.lastIndex > at - from ? from + PRE_TOKEN.lastIndex : this.segmentEnd
        if (end - at <= HOT_PIECE) {
          n += pieceCount(text.slice(at, end))
          at = end
          continue
        }
      }
      // A long pre-token: merged whole up to MAX_MERGED code units, else in pieces of that many, never between a
      // surrogate pair's halves.
      let cut = Math.min(at + MAX_MERGED, end)
      if (cut < end && isLowSurrogate(text.charCodeAt(cut))) cut--
      n += longPieceCount(text.slice(at, cut))
      at = cut
    }
    this.at = at
    this.end = end
    this.n = n
    // V8 keeps a regular expression's last subject (`RegExp.input`): the text is let go with it.
    FORGET.test('')
    return this.done
  }

  /**
   * The stretch the split reads next, from `at`: the rest of the text when at most SEGMENT_UNITS long, else up to the
   * first place past half of that where a cut keeps the pre-tokens (`CUT`), else (no such place: docs/architecture.md
   * §15.9) SEGMENT_UNITS long, never between a surrogate pair's halves.
   */
  private segmentFrom(at: number): void {
    const { text } = this
    let to = text.length
    if (to - at > SEGMENT_UNITS) {
      const from = at + SEGMENT_UNITS / 2
      // Two code units past the segment's longest: the code point after a cut is read whole.
      const ahead = text.slice(from, at + SEGMENT_UNITS + 2)
      CUT.lastIndex = 0
      const cut = CUT.exec(ahead) ? CUT.lastIndex : Infinity
      if (cut <= ahead.length - 2) to = from + cut
      else {
        to = at + SEGMENT_UNITS
        // A cut at a match's end is never inside a surrogate pair (the expression reads code points); this one may be.
        if (isLowSurrogate(text.charCodeAt(to))) to--
      }
    }
    this.segment = at === 0 && to === text.length ? text : text.slice(at, to)
    this.segmentStart = at
    this.segmentEnd = to
  }
}

/**
 * Code units of text the split reads at once. It matches a pre-token whole before any of it is counted, and one
 * pre-token can be most of a body (millions of combining marks), matched in one stretch however the count was stepped.
 * A longer text is split a segment at a time, each segment ending where a cut changes nothing (`CUT`).
 */
const SEGMENT_UNITS = 16_384

/**
 * A place where a text can be cut without changing its pre-tokens: after a letter that no letter, mark or apostrophe
 * follows, or between a character other than whitespace and a space (why: docs/architecture.md §15.9).
 */
const CUT = /\p{L}(?![\p{L}\p{M}'])|\S(?= )/gu

const FORGET = /(?:)/
