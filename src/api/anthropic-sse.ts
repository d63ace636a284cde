import type { Offer } from '../routing/catalog.js'
import type { Produced } from '../routing/attempt.js'
import type { Delivered } from '../gateway/charge.js'
import type { ReplyEvent } from '../gateway/reply-events.js'
import type { Admitted } from '../gateway/context.js'
import { ANTHROPIC_ERROR_TYPE, stopReasonOf } from '../protocol/anthropic.js'
import { messageId } from './anthropic-body.js'
import { svcOf } from './reply-svc.js'
import { SseWire, type SseWireOptions, type StreamWriter } from './sse-wire.js'

export interface AnthropicSseOptions extends SseWireOptions {
  request: Admitted
}

/**
 * A streamed reply as Anthropic's Messages events (docs/interface.md §4.4): `message_start`, each content block's
 * `content_block_start`, deltas (`thinking_delta`, `text_delta`, `input_json_delta`) and `content_block_stop`, then
 * `message_delta` with the stop reason, usage and `svc`, and `message_stop`; a failure after it began is an `error`
 * event. Text and thinking go out as they come; tool calls whole once the reply is, before its charge.
 */
export class AnthropicSse extends SseWire implements StreamWriter {
  private readonly request: Admitted
  private begun = false
  /** The block open now (thinking or text) and the next block's index. */
  private open: 'thinking' | 'text' | undefined
  private next = 0
  private toolsSent = false

  constructor(options: AnthropicSseOptions) {
    super(options)
    this.request = options.request
  }

  events(batch: readonly ReplyEvent[]): void {
    let out = ''
    for (const e of batch) {
      switch (e.type) {
        case 'start':
          out += this.commit(e.offer)
          break
        case 'reasoning':
          out += this.delta('thinking', e.text)
          break
        case 'content':
          out += this.delta('text', e.text)
          break
        case 'tool_call':
          break
        case 'finish':
          out += this.completion(e.reply)
          break
        case 'charged':
          return this.end(out + this.delivered(e.delivered))
        case 'failed':
          return this.end(out + this.failed(e.error.code, e.error.message))
      }
    }
    this.write(out)
  }

  fail(code: 'stream_interrupted' | 'provider_output_invalid', message: string): void {
    this.end(this.failed(code, message))
  }

  private event(type: string, fields: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`
  }

  private commit(_offer?: Offer): string {
    if (this.begun) return ''
    this.begun = true
    this.stopKeepAlive()
    const r = this.request
    const message = {
      id: messageId(r.requestId),
      type: 'message',
      role: 'assistant',
      model: r.prepared.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: r.prepared.inputTokens, output_tokens: 0 },
    }
    return this.event('message_start', { message })
  }

  private close(): string {
    if (!this.open) return ''
    this.open = undefined
    return this.event('content_block_stop', { index: this.next - 1 })
  }

  /** A piece of thinking or text, its block opened (and the other closed) first when needed. */
  private delta(kind: 'thinking' | 'text', text: string): string {
    let out = this.commit()
    if (this.open !== kind) {
      out += this.close()
      const content_block =
        kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' }
      out += this.event('content_block_start', { index: this.next++, content_block })
      this.open = kind
    }
    const delta = kind === 'text' ? { type: 'text_delta', text } : { type: 'thinking_delta', thinking: text }
    return out + this.event('content_block_delta', { index: this.next - 1, delta })
  }

  /** The reply is whole: its open block closed, each tool call sent whole as a block of its own. */
  private completion(reply: Produced): string {
    if (this.toolsSent) return ''
    this.toolsSent = true
    let out = this.commit()
    // A reply that came whole (recovered after a capture in doubt) has sent none of its text yet.
    if (this.next === 0) {
      if (reply.reasoning) out += this.delta('thinking', reply.reasoning)
      if (reply.content || reply.toolCalls.length === 0) out += this.delta('text', reply.content)
    }
    out += this.close()
    for (const c of reply.toolCalls) {
      const index = this.next++
      out += this.event('content_block_start', {
        index,
        content_block: { type: 'tool_use', id: c.id, name: c.function.name, input: {} },
      })
      out += this.event('content_block_delta', {
        index,
        delta: { type: 'input_json_delta', partial_json: c.function.arguments },
      })
      out += this.event('content_block_stop', { index })
    }
    return out
  }

  private delivered(f: Delivered): string {
    return (
      this.completion(f.reply) +
      this.event('message_delta', {
        delta: { stop_reason: stopReasonOf(f.reply.finish), stop_sequence: null },
        usage: { output_tokens: f.usage.completion_tokens },
        svc: svcOf(this.request, f),
      }) +
      this.event('message_stop', {})
    )
  }

  private failed(code: keyof typeof ANTHROPIC_ERROR_TYPE, message: string): string {
    return this.event('error', { error: { type: ANTHROPIC_ERROR_TYPE[code], message, code } })
  }
}
