/**
 * Incremental server-sent-events parser: text in, `data` payloads out. Handles LF, CRLF and CR line ends,
 * multi-line data fields, comments, and events split across network chunks.
 */
export class SseParser {
  private buffer = ''
  private data: string[] = []
  /**
   * Size of the event's data lines so far as they came, `data:` and line end included (one character for the end).
   * An upstream that sends empty `data:` lines without end is then caught by the size limit read from `buffered`,
   * at six characters a line: counted by their values alone they stayed at 0 while the array holding them grew.
   */
  private dataSize = 0
  /**
   * Next LF and next CR at or after where each was last searched from; -1 none to the buffer's end; -2 not searched
   * since the buffer changed. Each kind is searched for again only once a line has passed the one found, so no stretch
   * of a read is searched twice (docs/architecture.md §15.31).
   */
  private lf = -2
  private cr = -2
  /**
   * Reads without a line end, after the buffer: most of a long line. Kept aside and joined once the line ends, for
   * appending each to the buffer and searching it again would cost the whole line on every read.
   */
  private parts: string[] = []
  private partsLength = 0

  /** Feeds decoded text; returns the payloads of the events it completed. */
  push(text: string): string[] {
    if (text.indexOf('\n') < 0 && text.indexOf('\r') < 0 && !this.buffer.endsWith('\r')) {
      this.parts.push(text)
      this.partsLength += text.length
      return []
    }
    const out: string[] = []
    // What was held has no line end, but for a CR at its very end (the first half of a CRLF, perhaps).
    const scanFrom = Math.max(0, this.buffer.length + this.partsLength - 1)
    this.buffer += this.takeParts() + text
    this.lf = -2
    this.cr = -2
    let start = 0
    for (;;) {
      const nl = this.nextLineEnd(Math.max(start, scanFrom))
      if (nl < 0) break
      const line = this.buffer.slice(start, nl)
      start = nl + (this.buffer[nl] === '\r' && this.buffer[nl + 1] === '\n' ? 2 : 1)
      if (line === '') {
        if (this.data.length) out.push(this.data.join('\n'))
        this.clearData()
      } else if (line.startsWith('data:')) {
        this.addData(line)
      } else if (line.startsWith('error:')) {
        this.addError(line)
      }
      // `event:`, `id:`, `retry:` and `:` comments carry nothing the gateway needs.
    }
    this.buffer = this.buffer.slice(start)
    return out
  }

  /** Between events, at the start of a line: nothing held. */
  get idle(): boolean {
    return this.buffer === '' && this.partsLength === 0 && this.data.length === 0
  }

  /** Characters of the event under way: its data lines as they came (see `dataSize`) and the unfinished line. */
  get buffered(): number {
    return this.buffer.length + this.partsLength + this.dataSize
  }

  /** The text held ends with a CR, which a LF may yet follow (the two are one line end). */
  get endsWithCr(): boolean {
    return this.partsLength === 0 && this.buffer.endsWith('\r')
  }

  /** Payload of an event left unterminated when the stream ended, if any. */
  end(): string | undefined {
    this.buffer += this.takeParts()
    if (this.buffer.startsWith('data:')) this.addData(this.buffer)
    this.buffer = ''
    this.lf = -2
    this.cr = -2
    const last = this.data.length ? this.data.join('\n') : undefined
    this.clearData()
    return last
  }

  /** Keeps the value of a `data:` line (the one space after the colon is not part of it). */
  private addData(line: string): void {
    const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5)
    this.data.push(value)
    this.dataSize += line.length + 1
  }

  /**
   * Keeps an `error:` line, which no SSE spec defines but llama.cpp's server writes for an error in its stream (its
   * value the error's JSON object), as the data `{"error":value}`: an error chunk as other engines write it.
   */
  private addError(line: string): void {
    const value = line.charCodeAt(6) === 32 ? line.slice(7) : line.slice(6)
    this.data.push(`{"error":${value}}`)
    this.dataSize += line.length + 1
  }

  private clearData(): void {
    this.data = []
    this.dataSize = 0
  }

  private takeParts(): string {
    if (this.parts.length === 0) return ''
    const text = this.parts.join('')
    this.parts = []
    this.partsLength = 0
    return text
  }

  private nextLineEnd(from: number): number {
    if (this.lf === -2 || (this.lf >= 0 && this.lf < from)) this.lf = this.buffer.indexOf('\n', from)
    if (this.cr === -2 || (this.cr >= 0 && this.cr < from)) this.cr = this.buffer.indexOf('\r', from)
    const lf = this.lf
    const cr = this.cr
    if (cr < 0) return lf
    // A CR at the very end may be the first half of a CRLF split across chunks: wait for more.
    if (cr === this.buffer.length - 1) return lf >= 0 && lf < cr ? lf : -1
    return lf < 0 ? cr : Math.min(lf, cr)
  }
}
