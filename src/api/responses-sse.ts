import type { Offer } from '../routing/catalog.js'
import type { Produced } from '../routing/attempt.js'
import type { Delivered } from '../gateway/charge.js'
import type { ReplyEvent } from '../gateway/reply-events.js'
import type { Admitted } from '../gateway/context.js'
import { outputItems } from '../gateway/responses/output.js'
import { messageItemId, type MessageItem, type OutputItem, type OutputText } from '../protocol/responses.js'
import { deliveredResponse, failedSvc, responseObject, type ResponseFrame } from './responses-body.js'
import { SseWire, type SseWireOptions, type StreamWriter } from './sse-wire.js'

export interface ResponsesSseOptions extends SseWireOptions {
  frame: ResponseFrame
  request: Admitted
}

const part = (text: string): OutputText => ({ type: 'output_text', text, annotations: [], logprobs: [] })

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
  /** The text sent so far, once the message item is open. */
  private text: string | undefined
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
          out += (this.text === undefined ? this.openMessage() : '') + this.delta(e.text)
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

  private openMessage(): string {
    this.text = ''
    const item: MessageItem = {
      id: messageItemId(this.requestId),
      type: 'message',
      status: 'in_progress',
      role: 'assistant',
      content: [],
    }
    const at = { item_id: item.id, output_index: 0, content_index: 0 }
    return (
      this.event('response.output_item.added', { output_index: 0, item }) +
      this.event('response.content_part.added', { ...at, part: part('') })
    )
  }

  private delta(text: string): string {
    this.text += text
    const at = { item_id: messageItemId(this.requestId), output_index: 0, content_index: 0 }
    return this.event('response.output_text.delta', { ...at, delta: text, logprobs: [] })
  }

  /** The events that close the message and deliver each function call whole, unless written already. */
  private completion(reply: Produced): string {
    if (this.output) return ''
    let out = this.commit(reply.offer)
    const output = (this.output = outputItems(this.requestId, reply))
    output.forEach((item, output_index) => {
      if (item.type === 'message') {
        if (this.text === undefined) out += this.openMessage() + (reply.content ? this.delta(reply.content) : '')
        const at = { item_id: item.id, output_index, content_index: 0 }
        out += this.event('response.output_text.done', { ...at, text: reply.content, logprobs: [] })
        out += this.event('response.content_part.done', { ...at, part: part(reply.content) })
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
    const output: OutputItem[] = []
    if (this.text !== undefined && !this.output) {
      const id = messageItemId(this.requestId)
      output.push({ id, type: 'message', status: 'incomplete', role: 'assistant', content: [part(this.text)] })
    }
    const response = responseObject(this.frame, 'failed', {
      error: { code, message },
      output: this.output ?? output,
      svc: failedSvc(this.requestId, this.committedTo?.provider),
    })
    return this.opening() + this.event('response.failed', { response })
  }
}
