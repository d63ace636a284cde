import { StringDecoder } from 'node:string_decoder'
import { SseParser } from './sse-parser.js'
import { CONTENT_CHUNK_SOURCE, MAX_FAST_CHUNK, dataEvents, decodeContent } from './openai-chunks.js'
import type { UpstreamEvent } from './types.js'
import { ContentShape } from './content-shape.js'

/**
 * One whole content event as upstreams usually write it: a `data:` line holding a chunk matched by
 * `CONTENT_CHUNK_SOURCE`, then the blank line that ends the event. The chunk's text has no line end in it (its strings
 * exclude control characters), so this is exactly an event the SSE parser would read as that one chunk.
 */
const CONTENT_EVENT = new RegExp(String.raw`data: ?${CONTENT_CHUNK_SOURCE}\n\n`, 'y')

/** The longest line `CONTENT_EVENT` is tried on: a `data: ` line of the longest data `dataEvents` matches. */
const MAX_FAST_LINE = 'data: '.length + MAX_FAST_CHUNK

/**
 * An upstream's event stream, bytes in, events out, decoded as the SSE spec decodes them. Content events of the usual
 * shape and size are matched in place; from the first event that does not match, everything goes through `SseParser`
 * and `dataEvents` (why: docs/architecture.md §15.4).
 */
export class ChunkStream {
  private readonly parser = new SseParser()
  // undici's body ignores setEncoding: it yields bytes.
  private readonly utf8 = new StringDecoder('utf8')
  private begun = false
  /** Content chunks in the engine's own key order, once one was parsed. */
  private readonly shape = new ContentShape()
  /** `[DONE]` arrived. */
  done = false

  /** Appends the events completed by `bytes` to `out`; stops reading at a failure, and reads nothing after `[DONE]`. */
  push(bytes: Buffer, out: UpstreamEvent[]): void {
    if (this.done) return
    let text = this.utf8.write(bytes)
    if (!this.begun && text !== '') {
      this.begun = true
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    }
    const from = this.parser.idle ? contentEvents(text, out, this.shape) : 0
    if (from === text.length) return
    this.take(this.parser.push(from === 0 ? text : text.slice(from)), out)
  }

  /**
   * The events of whole SSE events' data, up to `[DONE]` (the stream's end, whatever follows it) or a failure; whether
   * `[DONE]` came.
   */
  private take(payloads: string[], out: UpstreamEvent[]): boolean {
    for (const data of payloads) {
      if (data === '[DONE]') return (this.done = true)
      const text = this.shape.contentOf(data)
      if (text !== undefined) {
        if (text.length > 0) out.push({ type: 'content', text })
        continue
      }
      const from = out.length
      if (dataEvents(data, out)) this.shape.learn(data, out, from)
      if (out[out.length - 1]?.type === 'failure') return false
    }
    return false
  }

  /** Characters held for an event not yet complete. */
  get buffered(): number {
    return this.parser.buffered
  }

  /**
   * The stream ended: appends the events its last bytes completed to `out`. A CR that ends the stream ends its line
   * (no LF can follow it now), which may end an event; an event left without its blank line counts if it was `[DONE]`.
   */
  end(out: UpstreamEvent[]): void {
    if (this.done) return
    // The start of a character cut off at the very end completes no event, but belongs to the last one.
    if (this.take(this.parser.push(this.utf8.end()), out)) return
    if (this.parser.endsWithCr && this.take(this.parser.push('\n'), out)) return
    if (this.parser.end() === '[DONE]') this.done = true
  }
}

/**
 * Appends the content of the whole content events that open `text`, one after another, to `out`; returns where the
 * first other one begins. An event whose line is longer than `MAX_FAST_LINE` is left to the parser, as `dataEvents`
 * leaves such data to the parse: on long text the match costs far more (see `MAX_FAST_CHUNK`).
 */
function contentEvents(text: string, out: UpstreamEvent[], shape: ContentShape): number {
  let from = 0
  for (;;) {
    // No line is longer than the text left: the search for its end (a fifth of the cost of a match) is needed only
    // in a long read, where most often many events came at once.
    if (text.length - from > MAX_FAST_LINE && !endsWithin(text, from, MAX_FAST_LINE)) return from
    CONTENT_EVENT.lastIndex = from
    const m = CONTENT_EVENT.exec(text)
    let body: string
    if (m !== null) {
      from = CONTENT_EVENT.lastIndex
      body = m[1]!
    } else {
      const event = shape.eventAt(text, from)
      if (event === undefined) return from
      from = event.end
      body = event.body
    }
    if (body.length > 0) out.push({ type: 'content', text: decodeContent(body) })
  }
}

/** The line that begins at `from` ends (with a LF) within `length` characters. */
function endsWithin(text: string, from: number, length: number): boolean {
  const lf = text.indexOf('\n', from)
  return lf >= 0 && lf - from <= length
}
