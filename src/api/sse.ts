import type { FinishReason, ReplySvc, ToolCall, Usage } from '../protocol/chat.js'
import type { Delivered } from '../gateway/charge.js'
import type { ReplyEvent } from '../gateway/reply-events.js'
import { ERROR_TABLE, type ErrorCode } from '../protocol/errors.js'
import type { Offer } from '../routing/catalog.js'
import { SseWire, type SseWireOptions, type StreamWriter } from './sse-wire.js'

export interface ChunkIdentity {
  id: string
  created: number
  model: string
}

/** What a stream's reply is built from: its wire, its chunks' identity, who serves, and its svc object. */
export interface ChatStreamOptions extends SseWireOptions {
  identity: ChunkIdentity
  /** The system_fingerprint of the offer that serves. */
  fingerprint: (offer: Offer) => string
  svc: (d: Delivered) => ReplySvc
}

export const DONE = 'data: [DONE]\n\n'

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
  /** Whether the prefix is all ASCII (the model and the fingerprint come from the config): see `ChatStream.events`. */
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

  /** A piece of the model's reasoning, as `reasoning_content` (the name llama.cpp, SGLang and DeepSeek give it). */
  reasoning(text: string, plain = isPlainAscii(text)): string {
    const json = plain ? `"${text}"` : JSON.stringify(text)
    return `${this.prefix}[{"index":0,"delta":{"reasoning_content":${json}},"finish_reason":null}]}\n\n`
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

/** A streamed chat completion: its events as chunks of the one encoder, the role chunk once it starts. */
export class ChatStream extends SseWire implements StreamWriter {
  readonly encoder: ChunkEncoder
  private readonly fingerprintOf: (offer: Offer) => string
  private readonly svcOf: (d: Delivered) => ReplySvc

  constructor(options: ChatStreamOptions) {
    super(options)
    this.fingerprintOf = options.fingerprint
    this.svcOf = options.svc
    this.encoder = new ChunkEncoder(options.identity)
  }

  /** One batch of the reply's events, encoded and written together (one write: one HTTP chunk). */
  events(batch: readonly ReplyEvent[]): void {
    const enc = this.encoder
    let out = ''
    let ascii = true
    for (const e of batch) {
      switch (e.type) {
        case 'start':
          this.stopKeepAlive()
          enc.fingerprint(this.fingerprintOf(e.offer))
          out += enc.role()
          ascii &&= enc.ascii
          break
        case 'content': {
          const plain = isPlainAscii(e.text)
          out += enc.content(e.text, plain, e.logprobs)
          // Log probabilities are the upstream's JSON: not known to be ASCII.
          ascii &&= plain && enc.ascii && !e.logprobs
          break
        }
        case 'reasoning': {
          const plain = isPlainAscii(e.text)
          out += enc.reasoning(e.text, plain)
          ascii &&= plain && enc.ascii
          break
        }
        case 'tool_call':
          out += enc.toolCall(e.index, e.call)
          ascii = false
          break
        case 'finish':
          out += enc.finish(e.reason)
          break
        case 'charged':
          return this.end(out + enc.usage(e.delivered.usage) + enc.svc(this.svcOf(e.delivered)) + DONE)
        case 'failed':
          return this.end(out + enc.error(e.code, e.error.message) + DONE)
      }
    }
    this.write(out, ascii)
  }

  fail(code: 'stream_interrupted' | 'provider_output_invalid', message: string): void {
    this.end(this.encoder.error(code, message) + DONE)
  }
}
