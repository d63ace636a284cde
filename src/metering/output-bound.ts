import type { TokenCounter } from './counter.js'
import { O200K } from './tokens.js'

/**
 * More characters a token than ordinary text has: a reply shorter than this many characters a token of its bound is
 * not counted; one past it is given away at most this many characters a token of it (docs/architecture.md §15.5).
 */
const CHARS_PER_TOKEN = 8
/**
 * Characters a token of text outside ASCII: Chinese and Japanese take 1–1.5 under o200k, Korean and Hindi about 2,
 * Cyrillic and Greek 3–4. Each such character weighs CHARS_PER_TOKEN / NON_ASCII_CHARS_PER_TOKEN ASCII ones, so dense
 * scripts are counted as early, for their length, as prose is.
 */
const NON_ASCII_CHARS_PER_TOKEN = 2
const NON_ASCII_EXTRA = CHARS_PER_TOKEN / NON_ASCII_CHARS_PER_TOKEN - 1
/** Characters of tool-call arguments a token of the bound: far more than JSON of any tokenizer takes. */
const ARGUMENT_CHARS_PER_TOKEN = 32

/**
 * A streamed reply's bound (the max_tokens its upstream was sent), held against an upstream that ignores it: past it
 * the reply is cut, and billed at most at the bound. Content is counted only near the bound (`CHARS_PER_TOKEN`),
 * tool-call arguments by their characters alone; a reply within its bound is never cut (docs/architecture.md §15.5).
 */
export class OutputBound {
  private countAt: number
  private readonly argumentChars: number
  private argumentsSeen = 0
  /** Characters outside ASCII in the content so far. */
  private nonAscii = 0

  constructor(
    private readonly maxTokens: number,
    private readonly counter: TokenCounter = O200K,
  ) {
    this.countAt = maxTokens * CHARS_PER_TOKEN
    this.argumentChars = maxTokens * ARGUMENT_CHARS_PER_TOKEN
  }

  /** Whether `content`, the reply so far (its last event's text `added`), has more tokens than the bound. */
  passed(content: string, added: string): boolean {
    for (let i = 0; i < added.length; i++) if (added.charCodeAt(i) > 0x7f) this.nonAscii++
    // Weighed as ASCII characters: 8 of them a token.
    const chars = content.length + NON_ASCII_EXTRA * this.nonAscii
    if (chars < this.countAt) return false
    // Not kept in the count cache: a reply's prefix is never counted again, and would push out the prompts kept there.
    // Counted no further than past the bound: beyond it the reply is cut whatever its count.
    const n = this.counter.count(content, this.maxTokens)
    if (n > this.maxTokens) return true
    this.countAt = chars + Math.max(Math.ceil(((this.maxTokens - n + 1) * chars) / Math.max(n, 1)), chars >> 3)
    return false
  }

  /** Whether the tool-call arguments streamed so far, with `more`, are longer than any reply within the bound. */
  argumentsPassed(more: string | undefined): boolean {
    if (more) this.argumentsSeen += more.length
    return this.argumentsSeen > this.argumentChars
  }
}
