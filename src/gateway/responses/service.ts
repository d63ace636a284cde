import { isApiError } from '../../protocol/errors.js'
import type { ChatCall, ChatPipeline } from '../pipeline.js'
import type { Answer, ChatResult, ReplyEvents } from '../reply-events.js'
import { internalError } from '../refusals.js'
import type { ResponseMemory } from './memory.js'
import { outputItems } from './output.js'
import { readResponses, type ReadResponses } from './read.js'
import { responsesParam } from './request.js'

/** How a Responses request ended; `read` once it was read, for the reply's encoding. */
export type ResponsesResult = ChatResult & { read?: ReadResponses }

/**
 * The Responses API over the chat request life: the request is read as a chat request, served by the one pipeline,
 * and a delivered response is kept (unless `store: false`) before its charge reaches the route, so a follow-up finds
 * it.
 */
export class ResponsesService {
  constructor(
    private readonly pipeline: ChatPipeline,
    private readonly memory: ResponseMemory,
    private readonly log: (msg: string, err?: unknown) => void,
  ) {}

  async respond(call: ChatCall): Promise<ResponsesResult> {
    let read: Awaited<ReturnType<typeof readResponses>>
    try {
      // A keyless request (x402) has no key to find earlier responses under, nor to keep its own: none found or kept.
      const keyId = call.keyless ? `x402:${call.requestId}` : call.caller.keyId
      read = await readResponses(call.body, this.memory, keyId)
    } catch (err) {
      this.log(`request ${call.requestId}: the kept responses could not be read`, err)
      read = internalError(call.requestId)
    }
    if (isApiError(read)) {
      call.trace.outcome = read.code
      return { kind: 'refused', error: read }
    }
    const got = read
    // A retry repeats the Responses body: the same key on chat completions is another body, never a replay.
    const result = await this.pipeline.chat({ ...call, body: read.chat, keyedBody: call.body })
    if (result.kind === 'admitted')
      return { ...result, answer: result.answer.then((a) => this.answered(a, got, call)), read }
    return { ...this.answered(result, got, call), read }
  }

  /** An answer in the Responses API's terms: a refusal's field named as the request named it, a response kept. */
  private answered<A extends Answer>(a: A, read: ReadResponses, call: ChatCall): A {
    if (a.kind === 'refused' && a.error.param)
      return { ...a, error: { ...a.error, param: responsesParam(a.error.param, read.origins) } }
    if (a.kind === 'serving' && read.store && !call.keyless) return { ...a, events: this.keeping(a.events, read, call) }
    return a
  }

  /** The reply's events, its response kept once charged (before the route has the charge). */
  private async *keeping(events: ReplyEvents, read: ReadResponses, call: ChatCall): ReplyEvents {
    for await (const batch of events) {
      const charged = batch.find((e) => e.type === 'charged')
      if (charged?.type === 'charged') {
        const output = outputItems(call.requestId, charged.delivered.reply)
        // The reply is charged and goes out either way: a response that could not be kept is only not found later.
        await this.memory
          .keep(call.caller.keyId, call.requestId, read.conversation, output)
          .catch((err: unknown) => this.log(`request ${call.requestId}: its response could not be kept`, err))
      }
      yield batch
    }
  }
}
