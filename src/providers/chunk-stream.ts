import { SseParser } from './sse-parser.js'
import { CONTENT_CHUNK_SOURCE, dataEvents, decodeContent } from './openai-chunks.js'
import type { UpstreamEvent } from './types.js'

/**
 * One whole content event as upstreams usually write it: a `data:` line holding a chunk matched by
 * `CONTENT_CHUNK_SOURCE`, then the blank line that ends the event. The chunk's text has no line end in it (its strings
 * exclude control characters), so this is exactly an event the SSE parser would read as that one chunk.
 */
const CONTENT_EVENT = new RegExp(String.raw`data: ?${CONTENT_CHUNK_SOURCE}\n\n`, 'y')

/**
 * An upstream's event stream read into events. Content events in the usual shape, one after the other from where the
 * SSE parser stands between events, are matched in place in the text that arrived (sticky, one regular expression
 * per event); whatever else comes — another chunk, another shape, an event cut by the network — goes through
 * `SseParser` and `dataEvents`, from the first event that did not match. Splitting the text into lines and payloads
 * first cost as much as matching them (about 7 and 8.5 µs per 64-token stream here, against 6 for both in place).
 */
export class ChunkStream {
  private readonly parser = new SseParser()
  /** `[DONE]` arrived. */
  done = false

  /** Appends the events completed by `text` to `out`; stops reading at a failure. */
  push(text: string, out: UpstreamEvent[]): void {
    let from = 0
    if (this.parser.idle) {
      CONTENT_EVENT.lastIndex = 0
      for (let m = CONTENT_EVENT.exec(text); m !== null; m = CONTENT_EVENT.exec(text)) {
        from = CONTENT_EVENT.lastIndex
        const body = m[1]!
        if (body.length > 0) out.push({ type: 'content', text: decodeContent(body) })
      }
    }
    if (from === text.length) return
    for (const data of this.parser.push(from === 0 ? text : text.slice(from))) {
      if (data === '[DONE]') {
        this.done = true
        continue
      }
      dataEvents(data, out)
      if (out[out.length - 1]?.type === 'failure') return
    }
  }

  /** Characters held for an event not yet complete. */
  get buffered(): number {
    return this.parser.buffered
  }

  /** The stream ended: an event left without its blank line counts if it was `[DONE]`. */
  end(): void {
    if (this.parser.end() === '[DONE]') this.done = true
  }
}
