/**
 * Incremental server-sent-events parser: text in, `data` payloads out. Handles LF, CRLF and CR line ends,
 * multi-line data fields, comments, and events split across network chunks.
 */
export class SseParser {
  private buffer = ''
  private data: string[] = []
  /** Next CR at or after the last search start; -1 none in the buffer; -2 not searched since the buffer changed. */
  private cr = -2

  /** Feeds decoded text; returns the payloads of the events it completed. */
  push(text: string): string[] {
    const out: string[] = []
    this.buffer += text
    this.cr = -2
    let start = 0
    for (;;) {
      const nl = this.nextLineEnd(start)
      if (nl < 0) break
      const line = this.buffer.slice(start, nl)
      start = nl + (this.buffer[nl] === '\r' && this.buffer[nl + 1] === '\n' ? 2 : 1)
      if (line === '') {
        if (this.data.length) out.push(this.data.join('\n'))
        this.data = []
      } else if (line.startsWith('data:')) {
        this.data.push(line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5))
      }
      // `event:`, `id:`, `retry:` and `:` comments carry nothing the gateway needs.
    }
    this.buffer = this.buffer.slice(start)
    return out
  }

  /** Payload of an event left unterminated when the stream ended, if any. */
  end(): string | undefined {
    if (this.buffer.startsWith('data:')) this.data.push(this.buffer.slice(this.buffer.charCodeAt(5) === 32 ? 6 : 5))
    this.buffer = ''
    this.cr = -2
    const last = this.data.length ? this.data.join('\n') : undefined
    this.data = []
    return last
  }

  private nextLineEnd(from: number): number {
    const lf = this.buffer.indexOf('\n', from)
    // Streams rarely use CR: search for it once per push, not once per line (each search scans to the end).
    if (this.cr === -2 || (this.cr >= 0 && this.cr < from)) this.cr = this.buffer.indexOf('\r', from)
    const cr = this.cr
    if (cr < 0) return lf
    // A CR at the very end may be the first half of a CRLF split across chunks: wait for more.
    if (cr === this.buffer.length - 1) return lf >= 0 && lf < cr ? lf : -1
    return lf < 0 ? cr : Math.min(lf, cr)
  }
}
