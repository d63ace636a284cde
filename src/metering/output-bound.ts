import { tokenCount } from './tokens.js'

/**
 * More characters a token than ordinary text has (English prose has about 4.5, code less): a reply shorter than this
 * many characters a token of its bound cannot have passed it, and is not counted.
 */
const CHARS_PER_TOKEN = 6

/**
 * A streamed reply's bound (the max_tokens its upstream was sent), held against an upstream that ignores it: past it
 * the reply is cut, so it cannot grow without end in the client's stream and the gateway's memory.
 * The reply is counted only once it is long enough to have passed the bound, then again once it has grown by what the
 * rest of the bound would take at its own characters per token, and by at least an eighth (so all the counts of a
 * reply cost at most a few counts of the whole of it). An upstream that keeps its bound is never cut. One that does
 * not is cut within an eighth past the bound for text of up to 6 characters a token; denser text (a token or more a
 * character) is counted first at 6 characters a token of the bound, and cut there.
 */
export class OutputBound {
  private countAt: number

  constructor(private readonly maxTokens: number) {
    this.countAt = maxTokens * CHARS_PER_TOKEN
  }

  /** Whether `content`, the reply so far, has more tokens than the bound. */
  passed(content: string): boolean {
    const chars = content.length
    if (chars < this.countAt) return false
    const n = tokenCount(content)
    if (n > this.maxTokens) return true
    this.countAt = chars + Math.max(Math.ceil(((this.maxTokens - n + 1) * chars) / Math.max(n, 1)), chars >> 3)
    return false
  }
}
