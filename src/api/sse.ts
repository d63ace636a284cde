import type { OutgoingHttpHeaders } from 'node:http'
import type { FastifyReply } from 'fastify'
import type { FinishReason, ReplySvc, ToolCall, Usage } from '../protocol/chat.js'
import { ERROR_TABLE, type ErrorCode } from '../protocol/errors.js'
import type { Offer } from '../routing/catalog.js'
import type { Produced, StreamSink } from '../routing/failover.js'
import type { Cancel } from '../providers/cancel.js'

export interface ChunkIdentity {
  id: string
  created: number
  model: string
}

/** What a stream's reply is built from: its response, its chunks' identity, and its timing. */
export interface SseReplyOptions {
  reply: FastifyReply
  identity: ChunkIdentity
  requestId: string
  /** The system_fingerprint of the offer that serves. */
  fingerprint: (offer: Offer) => string
  keepAliveMs: number
  stallTimeoutMs: number
  /** Told when the stream's first byte goes out. */
  onFirstByte?: () => void
}

export const DONE = 'data: [DONE]\n\n'
export const KEEP_ALIVE = ': keep-alive\n\n'

/**
 * Whether `text` is ASCII with nothing JSON escapes (no control character, quote or backslash): its JSON string is
 * then the text in quotes, and its UTF-8 bytes are its latin1 ones. A token of English text nearly always is, and
 * checking its few characters costs about half of a `JSON.stringify` call.
 */
export function isPlainAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x20 || c >= 0x80 || c === 0x22 || c === 0x5c) return false
  }
  return true
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) >= 0x80) return false
  return true
}

/**
 * The one encoder of the gateway's stream (docs/architecture.md §3, §6). Every chunk shares a prefix built once per
 * reply; each event then costs one string concatenation and the JSON of its own payload.
 */
export class ChunkEncoder {
  private prefix: string
  private readonly bare: string
  private readonly identityAscii: boolean
  /** Whether the prefix is all ASCII (the model and the fingerprint come from the config): see `SseReply.write`. */
  ascii: boolean

  constructor(identity: ChunkIdentity) {
    this.bare = `data: {"id":${JSON.stringify(identity.id)},"object":"chat.completion.chunk","created":${identity.created},"model":${JSON.stringify(identity.model)}`
    this.prefix = `${this.bare},"choices":`
    // Only the identity's strings can be other than ASCII: testing them spares a flattening of the whole prefix.
    this.identityAscii = this.ascii = isAscii(identity.id) && isAscii(identity.model)
  }

  /** Fixes system_fingerprint for every later chunk (known once an offer commits). */
  fingerprint(fp: string): void {
    this.prefix = `${this.bare},"system_fingerprint":${JSON.stringify(fp)},"choices":`
    this.ascii = this.identityAscii && isAscii(fp)
  }

  role(): string {
    return `${this.prefix}[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n`
  }

  /**
   * `plain`: `isPlainAscii(text)`, when the caller has it already. The same text as `JSON.stringify` either way.
   * `logprobs`: the upstream's entries for this text, written as OpenAI places them, beside the delta.
   */
  content(text: string, plain = isPlainAscii(text), logprobs?: readonly unknown[]): string {
    const json = plain ? `"${text}"` : JSON.stringify(text)
    const lp = logprobs ? `,"logprobs":{"content":${JSON.stringify(logprobs)},"refusal":null}` : ''
    return `${this.prefix}[{"index":0,"delta":{"content":${json}}${lp},"finish_reason":null}]}\n\n`
  }

  toolCall(index: number, call: ToolCall): string {
    const c = {
      index,
      id: call.id,
      type: 'function',
      function: { name: call.function.name, arguments: call.function.arguments },
    }
    return `${this.prefix}[{"index":0,"delta":{"tool_calls":[${JSON.stringify(c)}]},"finish_reason":null}]}\n\n`
  }

  finish(reason: FinishReason): string {
    return `${this.prefix}[{"index":0,"delta":{},"finish_reason":"${reason}"}]}\n\n`
  }

  usage(u: Usage): string {
    return `${this.prefix}[],"usage":${JSON.stringify(u)}}\n\n`
  }

  svc(svc: ReplySvc): string {
    return `${this.prefix}[],"svc":${JSON.stringify(svc)}}\n\n`
  }

  error(code: ErrorCode, message: string): string {
    return `${this.bare},"choices":[],"error":${JSON.stringify({ type: ERROR_TABLE[code].type, code, message })}}\n\n`
  }
}

/**
 * A streamed reply on the wire. Headers go out when the reply commits to an offer (its first content) or
 * when a keep-alive is due, so that failures before that can still be plain HTTP errors.
 */
export class SseReply implements StreamSink {
  readonly encoder: ChunkEncoder
  private committedTo: Offer | undefined
  private started = false
  private keepAlive: NodeJS.Timeout | undefined

  private readonly reply: FastifyReply
  private readonly requestId: string
  private readonly fingerprintOf: (offer: Offer) => string
  /** Longest `drained()` waits before the client is taken as gone (its connection is closed). */
  private readonly stallTimeoutMs: number

  private readonly onFirstByte: (() => void) | undefined

  constructor({ reply, identity, requestId, fingerprint, keepAliveMs, stallTimeoutMs, onFirstByte }: SseReplyOptions) {
    this.reply = reply
    this.onFirstByte = onFirstByte
    this.requestId = requestId
    this.fingerprintOf = fingerprint
    this.stallTimeoutMs = stallTimeoutMs
    this.encoder = new ChunkEncoder(identity)
    this.keepAlive = setInterval(() => this.write(KEEP_ALIVE, true), keepAliveMs)
    this.keepAlive.unref()
  }

  get committed(): boolean {
    return this.committedTo !== undefined
  }

  /** Whether the status line went out: after that, errors can only be chunks. */
  get headersSent(): boolean {
    return this.started
  }

  /**
   * A reply with tool calls sends them, and its finish reason, before it is charged: a client leaving meanwhile has
   * been sent what it pays for. Any other reply's content went out already; its finish goes with its end.
   */
  complete(reply: Produced): void {
    if (reply.toolCalls.length > 0) this.write(this.completion(reply))
  }

  /** The reply's tool calls and finish reason were written (`completion`). */
  private completed = false

  /** The chunks of the reply's tool calls and finish reason, unless written already; the reply committed. */
  completion(reply: Produced): string {
    if (this.completed) return ''
    this.completed = true
    this.commit(reply.offer)
    let out = ''
    reply.toolCalls.forEach((call, i) => (out += this.encoder.toolCall(i, call)))
    return out + this.encoder.finish(reply.finish)
  }

  /** Commits to an offer: fingerprint fixed, role chunk sent. */
  commit(offer: Offer): void {
    if (this.committedTo) return
    this.committedTo = offer
    this.stopKeepAlive()
    this.encoder.fingerprint(this.fingerprintOf(offer))
    this.write(this.encoder.role(), this.encoder.ascii)
  }

  content(offer: Offer, text: string, logprobs?: readonly unknown[]): void {
    if (!this.committedTo) this.commit(offer)
    const plain = isPlainAscii(text)
    // Log probabilities are the upstream's JSON: not known to be ASCII.
    this.write(this.encoder.content(text, plain, logprobs), plain && this.encoder.ascii && !logprobs)
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
      // The gateway's time until the stream's first byte (the upstream's share is known only at its end).
      'server-timing': `gateway;dur=${this.reply.elapsedTime.toFixed(1)}`,
    })
    this.onFirstByte?.()
  }
}
