import type { Offer } from '../routing/catalog.js'
import type { Produced } from '../routing/attempt.js'
import type { Delivered } from '../gateway/charge.js'
import type { ReplyEvent } from '../gateway/reply-events.js'
import type { Admitted } from '../gateway/context.js'
import { outputItems } from '../gateway/responses/output.js'
import { messageItemId, reasoningItemId, type OutputItem, type OutputText } from '../protocol/responses.js'
import { deliveredResponse, failedSvc, responseObject, type ResponseFrame } from './responses-body.js'
import { SseWire, type SseWireOptions, type StreamWriter } from './sse-wire.js'

export interface ResponsesSseOptions extends SseWireOptions {
  frame: ResponseFrame
  request: Admitted
}

const part = (text: string): OutputText => ({ type: 'output_text', text, annotations: [], logprobs: [] })
const thought = (text: string) => ({ type: 'reasoning_text' as const, text })

/** The items whose text is streamed as it comes: the message, and the reasoning. */
type TextKind = 'message' | 'reasoning'

/**
 * A streamed response: the Responses API's events, each with its type and sequence number (docs/interface.md). Text
 * goes out as it comes; function calls go out whole once the reply is (the tool-streaming rule), before its charge.
 */
export class ResponsesSse extends SseWire implements StreamWriter {
  private readonly frame: ResponseFrame
  private readonly request: Admitted
  private sequence = 0
  private committedTo: Offer | undefined
  private opened = false
  /** The text items opened so far (at their output index), and the text each was sent. */
  private readonly texts: { [K in TextKind]?: { id: string; index: number; text: string } } = {}
  /** Items opened so far: the next one's output index. */
  private items = 0
  /** The events of the reply's items were written (`completion`), and its items. */
  private output: OutputItem[] | undefined

  constructor(options: ResponsesSseOptions) {
    super(options)
    this.frame = options.frame
    this.request = options.request
  }

  /** One batch of the reply's events, written together. */
  events(batch: readonly ReplyEvent[]): void {
    let out = ''
    for (const e of batch) {
      switch (e.type) {
        case 'start':
          out += this.commit(e.offer)
          break
        case 'content':
          out += this.delta('message', e.text)
          break
        case 'reasoning':
          out += this.delta('reasoning', e.text)
          break
        case 'tool_call':
          // Function calls go out whole with the reply's other items, at its finish.
          break
        case 'finish':
          out += this.completion(e.reply)
          break
        case 'charged':
          return this.end(out + this.delivered(this.request, e.delivered))
        case 'failed':
          return this.end(out + this.failed(e.code, e.error.message))
      }
    }
    this.write(out)
  }

  fail(code: 'stream_interrupted' | 'provider_output_invalid', message: string): void {
    this.end(this.failed(code, message))
  }

  private event(type: string, fields: Record<string, unknown>): string {
    const data = JSON.stringify({ type, sequence_number: this.sequence++, ...fields })
    return `event: ${type}\ndata: ${data}\n\n`
  }

  /** response.created and response.in_progress, once: the stream's first events. */
  private opening(): string {
    if (this.opened) return ''
    this.opened = true
    const response = responseObject(this.frame, 'in_progress')
    return this.event('response.created', { response }) + this.event('response.in_progress', { response })
  }

  private commit(offer: Offer): string {
    if (this.committedTo) return ''
    this.committedTo = offer
    this.stopKeepAlive()
    return this.opening()
  }

  /** The text item of `kind`, opened (at the next output index) unless it is; the events that open it. */
  private open(kind: TextKind): string {
    if (this.texts[kind]) return ''
    const id = kind === 'message' ? messageItemId(this.requestId) : reasoningItemId(this.requestId)
    const index = this.items++
    this.texts[kind] = { id, index, text: '' }
    const item: OutputItem =
      kind === 'message'
        ? { id, type: 'message', status: 'in_progress', role: 'assistant', content: [] }
        : { id, type: 'reasoning', status: 'in_progress', summary: [], content: [] }
    const at = { item_id: id, output_index: index, content_index: 0 }
    return (
      this.event('response.output_item.added', { output_index: index, item }) +
      this.event('response.content_part.added', { ...at, part: kind === 'message' ? part('') : thought('') })
    )
  }

  /** A piece of the item of `kind`'s text, the item opened first if it is not. */
  private delta(kind: TextKind, text: string): string {
    const opening = this.open(kind)
    const t = this.texts[kind]!
    t.text += text
    const at = { item_id: t.id, output_index: t.index, content_index: 0 }
    return (
      opening +
      (kind === 'message'
        ? this.event('response.output_text.delta', { ...at, delta: text, logprobs: [] })
        : this.event('response.reasoning_text.delta', { ...at, delta: text }))
    )
  }

  /** The events that close the text items and deliver each function call whole, unless written already. */
  private completion(reply: Produced): string {
    if (this.output) return ''
    let out = this.commit(reply.offer)
    const output = (this.output = outputItems(this.requestId, reply))
    output.forEach((item, output_index) => {
      if (item.type === 'message' || item.type === 'reasoning') {
        const kind = item.type
        const text = kind === 'message' ? reply.content : reply.reasoning
        // A reply that came whole (a plain one's, recovered) opens its items here, in order.
        if (!this.texts[kind]) out += this.open(kind) + (text ? this.delta(kind, text) : '')
        const at = { item_id: item.id, output_index, content_index: 0 }
        if (kind === 'message') {
          out += this.event('response.output_text.done', { ...at, text, logprobs: [] })
          out += this.event('response.content_part.done', { ...at, part: part(text) })
        } else {
          out += this.event('response.reasoning_text.done', { ...at, text })
          out += this.event('response.content_part.done', { ...at, part: thought(text) })
        }
      } else {
        const at = { item_id: item.id, output_index }
        out += this.event('response.output_item.added', {
          output_index,
          item: { ...item, status: 'in_progress', arguments: '' },
        })
        out += this.event('response.function_call_arguments.delta', { ...at, delta: item.arguments })
        out += this.event('response.function_call_arguments.done', {
          ...at,
          name: item.name,
          arguments: item.arguments,
        })
      }
      out += this.event('response.output_item.done', { output_index, item })
    })
    return out
  }

  /** The last events of a delivered response: its items' unless sent, then response.completed (or .incomplete). */
  private delivered(r: Admitted, f: Delivered): string {
    const items = this.completion(f.reply)
    const response = deliveredResponse(this.frame, r, f, this.output)
    const type = response.status === 'incomplete' ? 'response.incomplete' : 'response.completed'
    return items + this.event(type, { response })
  }

  /** A failure after the stream began: response.failed with our code, the text sent so far, and nothing charged. */
  private failed(code: 'stream_interrupted' | 'provider_output_invalid', message: string): string {
    // What was sent of the text items, incomplete, in the order they opened.
    const output: OutputItem[] = []
    const kinds = (['message', 'reasoning'] as const).filter((k) => this.texts[k] !== undefined)
    const sent = kinds.map((kind) => ({ kind, ...this.texts[kind]! })).sort((x, y) => x.index - y.index)
    for (const t of sent)
      output.push(
        t.kind === 'message'
          ? { id: t.id, type: 'message', status: 'incomplete', role: 'assistant', content: [part(t.text)] }
          : { id: t.id, type: 'reasoning', status: 'incomplete', summary: [], content: [thought(t.text)] },
      )
    const response = responseObject(this.frame, 'failed', {
      error: { code, message },
      output: this.output ?? output,
      svc: failedSvc(this.requestId, this.committedTo?.provider),
    })
    return this.opening() + this.event('response.failed', { response })
  }
}
