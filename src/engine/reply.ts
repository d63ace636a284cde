// A reply as the engine generates it: text split into reasoning and content, and tool calls whose arguments arrive in
// fragments. Streamed, each piece is written as a chat completion chunk when it is known; whole, it is the message.
import { randomBytes } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import { ThinkSplit } from './think-split.js'

export interface ReplyHead {
  id: string
  created: number
  model: string
}

interface Call {
  id: string
  name: string
  arguments: string
}

export class Reply {
  private readonly split = new ThinkSplit()
  private content = ''
  private reasoning = ''
  private readonly calls: Call[] = []

  /** `stream`: where chunks are written as the reply grows; without it the reply is only gathered. */
  constructor(
    private readonly head: ReplyHead,
    private readonly stream?: ServerResponse,
  ) {}

  get hasCalls(): boolean {
    return this.calls.length > 0
  }

  /** Writes a chunk of `delta` (a stream's first with the role, its last with the finish reason). */
  chunk(delta: Record<string, unknown>, finish: string | null = null): void {
    this.stream?.write(
      `data: ${JSON.stringify({ ...this.head, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`,
    )
  }

  /** Text the model said: a reasoning model's thought is reasoning_content, as llama.cpp's server writes it. */
  text(text: string): void {
    this.said(this.split.push(text))
  }

  /** Begins a call of `name`; the index its arguments are added under. */
  call(name: string): number {
    const id = `call_${randomBytes(12).toString('hex')}`
    const index = this.calls.push({ id, name, arguments: '' }) - 1
    this.chunk({ tool_calls: [{ index, id, type: 'function', function: { name, arguments: '' } }] })
    return index
  }

  /** A fragment of call `index`'s arguments. */
  arguments(index: number, fragment: string): void {
    if (!fragment) return
    this.calls[index]!.arguments += fragment
    this.chunk({ tool_calls: [{ index, function: { arguments: fragment } }] })
  }

  /** The end of the text: what the split held back. */
  end(): void {
    this.said(this.split.end())
  }

  /** The whole reply, as a chat completion's message. */
  message(): Record<string, unknown> {
    const tools = this.calls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    }))
    return {
      role: 'assistant',
      content: this.content || (tools.length ? null : ''),
      ...(this.reasoning ? { reasoning_content: this.reasoning } : {}),
      ...(tools.length ? { tool_calls: tools } : {}),
    }
  }

  private said(p: { reasoning: string; content: string }): void {
    this.reasoning += p.reasoning
    this.content += p.content
    if (p.reasoning) this.chunk({ reasoning_content: p.reasoning })
    if (p.content) this.chunk({ content: p.content })
  }
}
