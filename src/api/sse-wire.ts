import type { OutgoingHttpHeaders } from 'node:http'
import type { FastifyReply } from 'fastify'
import type { Cancel } from '../providers/cancel.js'
import type { ReplyEvent } from '../gateway/reply-events.js'

export const KEEP_ALIVE = ': keep-alive\n\n'

/** What a stream's wire is built from: its response and its timing. */
export interface SseWireOptions {
  reply: FastifyReply
  requestId: string
  keepAliveMs: number
  stallTimeoutMs: number
  /** Told when the stream's first byte goes out. */
  onFirstByte?: () => void
  /** The upstreams' time so far until their first event, once one came: its share of the time to the first byte. */
  upstreamMs?: () => number | undefined
}

/** A stream as its route drives it: the reply's events written as they come, the client's pace, its end. */
export interface StreamWriter {
  /** Whether the status line went out: after that, errors can only be events. */
  readonly headersSent: boolean
  /** The client has not taken what it was sent: pull no more until `drained`. */
  readonly backlogged: boolean
  drained(cancel: Cancel): Promise<void>
  /** One batch of the reply's events; the last (charged, failed) ends the stream. */
  events(batch: readonly ReplyEvent[]): void
  /** Ends a stream whose headers went out with a failure: nothing was charged. */
  fail(code: 'stream_interrupted' | 'provider_output_invalid', message: string): void
  stopKeepAlive(): void
  end(text?: string): void
}

/**
 * A streamed reply on the wire, whatever its events encode (chat completion chunks, Responses events). Headers go out
 * with the first event or when a keep-alive is due, so that failures before that can still be plain HTTP errors.
 */
export class SseWire {
  private started = false
  private keepAlive: NodeJS.Timeout | undefined

  protected readonly reply: FastifyReply
  protected readonly requestId: string
  /** Longest `drained()` waits before the client is taken as gone (its connection is closed). */
  private readonly stallTimeoutMs: number

  private readonly onFirstByte: (() => void) | undefined
  private readonly upstreamMs: (() => number | undefined) | undefined

  constructor({ reply, requestId, keepAliveMs, stallTimeoutMs, onFirstByte, upstreamMs }: SseWireOptions) {
    this.reply = reply
    this.onFirstByte = onFirstByte
    this.upstreamMs = upstreamMs
    this.requestId = requestId
    this.stallTimeoutMs = stallTimeoutMs
    this.keepAlive = setInterval(() => this.write(KEEP_ALIVE, true), keepAliveMs)
    this.keepAlive.unref()
  }

  /** Whether the status line went out: after that, errors can only be events. */
  get headersSent(): boolean {
    return this.started
  }

  /**
   * Node holds what the socket could not take yet: past its high-water mark the client is behind. What was joined for
   * this turn's write (`pending`) is not counted; it is at most one upstream read.
   */
  get backlogged(): boolean {
    return this.reply.raw.writableNeedDrain
  }

  drained(cancel: Cancel): Promise<void> {
    const raw = this.reply.raw
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(stalled)
        raw.off('drain', done)
        raw.off('close', done)
        cancel.off('abort', done)
        resolve()
      }
      // Its closing ends the wait, and (its request's cancel) the request: it pays for what it was sent.
      const stalled = setTimeout(() => raw.destroy(), this.stallTimeoutMs)
      raw.on('drain', done)
      raw.on('close', done)
      cancel.on('abort', done)
      if (raw.destroyed || cancel.aborted) done()
    })
  }

  /**
   * Events produced in one turn (those parsed from one upstream read) are joined and written once: one HTTP chunk
   * and one syscall, where a write per event would cost a chunk header, a stream call and an iovec each.
   * `ascii`: the caller knows `text` is all ASCII (see `flush`).
   */
  write(text: string, ascii = false): void {
    if (!this.started) this.start()
    if (this.pending === '') {
      process.nextTick(this.flush)
      this.pendingAscii = true
    }
    this.pending += text
    this.pendingAscii &&= ascii
  }

  private pending = ''
  /** Every character written into `pending` since the last flush is ASCII. */
  private pendingAscii = true
  private readonly flush = () => {
    const text = this.pending
    this.pending = ''
    const raw = this.reply.raw
    // ASCII text is its own UTF-8. Written as latin1, node takes its length as it is and copies its characters; as
    // UTF-8 it flattens the joined text and scans it for its length, then encodes it.
    // The status line and headers, when they go out with it, are ASCII too (fixed names, the gateway's request id).
    if (text !== '' && !raw.destroyed && !raw.writableEnded) raw.write(text, this.pendingAscii ? 'latin1' : 'utf8')
  }

  end(text = ''): void {
    this.stopKeepAlive()
    if (!this.started) this.start()
    const raw = this.reply.raw
    const rest = this.pending + text
    this.pending = ''
    if (!raw.destroyed && !raw.writableEnded) raw.end(rest)
  }

  stopKeepAlive(): void {
    if (this.keepAlive) clearInterval(this.keepAlive)
    this.keepAlive = undefined
  }

  private start(): void {
    this.started = true
    this.reply.hijack()
    this.reply.raw.writeHead(200, {
      // Those set on the reply before it was hijacked (CORS, a limited key's rate headers).
      ...(this.reply.getHeaders() as OutgoingHttpHeaders),
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
      'x-request-id': this.requestId,
      'server-timing': this.timing(),
    })
    this.onFirstByte?.()
  }

  /**
   * The time to the first byte, split: the upstream's time to its first event, when one came before the headers
   * (a keep-alive due first sends them with only the gateway's time, which is then the whole wait).
   */
  private timing(): string {
    const total = this.reply.elapsedTime
    const upstream = this.upstreamMs?.()
    if (upstream === undefined) return `gateway;dur=${total.toFixed(1)}`
    return `gateway;dur=${Math.max(0, total - upstream).toFixed(1)}, upstream;dur=${upstream.toFixed(1)}`
  }
}
