import { JSON_STRING_BODY, MAX_FAST_CHUNK, chunkEvents, decodeContent } from './openai-chunks.js'
import type { UpstreamEvent } from './types.js'

const BODY = new RegExp(JSON_STRING_BODY, 'y')
const CONTENT_KEY = /"content"\s*:\s*"/g

/**
 * How many times in a row a stream's shape is learned with no chunk matching it in between: a stream whose chunks all
 * differ (a field that changes on each) stops paying for the trial parse. One that changes now and then (SGLang's and
 * TGI's `created`, the second of each chunk) learns it again each time.
 */
const MAX_MISSES = 4

/**
 * A stream's content chunks as its engine writes them, in whatever key order: the text before the content's string
 * body and the text after it, learned from a chunk the parse read as content alone. Another chunk of that text with
 * another string body in the hole is the same JSON but for the content, and is read without a parse. Engines write
 * every content chunk of a stream alike (llama.cpp's keys sorted, TGI's with `"usage":null`, vLLM's own order), so
 * one chunk teaches the rest (docs/architecture.md §15.4).
 */
export class ContentShape {
  private prefix: string | undefined
  private suffix = ''
  /** `prefix` and `suffix` as an SSE event's line around them: `data: ` before, the blank line after. */
  private eventPrefix = ''
  private eventSuffix = ''
  /** Shapes learned since one last matched. */
  private misses = 0

  /** The content of `data` when it has the learned shape; undefined when it has not. */
  contentOf(data: string): string | undefined {
    const prefix = this.prefix
    if (prefix === undefined || data.length > MAX_FAST_CHUNK || !data.startsWith(prefix)) return undefined
    const end = bodyEnd(data, prefix.length)
    if (end + this.suffix.length !== data.length || !data.endsWith(this.suffix)) return undefined
    this.misses = 0
    return decodeContent(data.slice(prefix.length, end))
  }

  /**
   * An SSE event of the learned shape that begins at `from` in `text` (`data: `, the chunk, a blank line): where it
   * ends and its content's string body; undefined when there is none there. The caller bounds the line's length.
   */
  eventAt(text: string, from: number): { end: number; body: string } | undefined {
    if (this.prefix === undefined || !text.startsWith(this.eventPrefix, from)) return undefined
    const start = from + this.eventPrefix.length
    const end = bodyEnd(text, start)
    if (!text.startsWith(this.eventSuffix, end)) return undefined
    this.misses = 0
    return { end: end + this.eventSuffix.length, body: text.slice(start, end) }
  }

  /**
   * `data` was parsed to `events`: when they are one content event and nothing else, its text is learned as the
   * stream's shape, once a trial with another content in the hole reads as that content alone.
   */
  learn(data: string, events: readonly UpstreamEvent[], from: number): void {
    if (this.misses >= MAX_MISSES || data.length > MAX_FAST_CHUNK || events.length - from > 1) return
    const only = events[from]
    if (only !== undefined && (only.type !== 'content' || only.logprobs)) return
    this.misses++
    for (const key of data.matchAll(CONTENT_KEY)) {
      const start = key.index + key[0].length
      const end = bodyEnd(data, start)
      if (data.charCodeAt(end) !== 0x22) continue
      const prefix = data.slice(0, start)
      const suffix = data.slice(end)
      if (!readsAsContent(`${prefix}x${suffix}`)) continue
      this.prefix = prefix
      this.suffix = suffix
      this.eventPrefix = `data: ${prefix}`
      this.eventSuffix = `${suffix}\n\n`
      return
    }
  }
}

/** Where the JSON string body that begins at `start` ends (at its closing quote, if it is well formed). */
function bodyEnd(text: string, start: number): number {
  BODY.lastIndex = start
  BODY.exec(text)
  return BODY.lastIndex
}

/** Whether `data` parses as a chunk whose only event is content `x`. */
function readsAsContent(data: string): boolean {
  let parsed: unknown
  try {
    parsed = JSON.parse(data)
  } catch {
    return false
  }
  const out: UpstreamEvent[] = []
  chunkEvents(parsed, out)
  const [only] = out
  return out.length === 1 && only?.type === 'content' && only.text === 'x' && !only.logprobs
}
