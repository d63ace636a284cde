import { isApiError } from '../../protocol/errors.js'
import type { Admitted } from '../context.js'
import type { ChatCall, ChatPipeline, ChatResult, OpenedStream } from '../pipeline.js'
import { internalError } from '../refusals.js'
import type { ResponseMemory } from './memory.js'
import { outputItems } from './output.js'
import { readResponses, type ReadResponses } from './read.js'
import { responsesParam } from './request.js'

/** One Responses request as the route hands it over: a chat call whose stream is opened with what was read. */
export interface ResponsesCall extends Omit<ChatCall, 'openStream'> {
  openStream: (r: Admitted, read: ReadResponses) => OpenedStream
}

/** How a Responses request ended; `read` once it was read, for the reply's encoding. */
export type ResponsesResult = ChatResult & { read?: ReadResponses }

/**
 * The Responses API over the chat request life: the request is read as a chat request, served by the one pipeline,
 * and a delivered response is kept (unless `store: false`) before its reply goes out, so a follow-up finds it.
 */
export class ResponsesService {
  constructor(
    private readonly pipeline: ChatPipeline,
    private readonly memory: ResponseMemory,
    private readonly log: (msg: string, err?: unknown) => void,
  ) {}

  async respond(call: ResponsesCall): Promise<ResponsesResult> {
    let read: Awaited<ReturnType<typeof readResponses>>
    try {
      read = await readResponses(call.body, this.memory, call.caller.keyId)
    } catch (err) {
      this.log(`request ${call.requestId}: the kept responses could not be read`, err)
      read = internalError(call.requestId)
    }
    if (isApiError(read)) {
      call.trace.outcome = read.code
      return { kind: 'refused', error: read }
    }
    const got = read
    const result: ResponsesResult = await this.pipeline.chat({
      ...call,
      body: read.chat,
      // A retry repeats the Responses body: the same key on chat completions is another body, never a replay.
      keyedBody: call.body,
      openStream: (r) => call.openStream(r, got),
    })
    const refusal = result.kind === 'refused' ? result : result.kind === 'finished' ? result.finished : undefined
    if (refusal?.kind === 'refused' && refusal.error.param)
      refusal.error = { ...refusal.error, param: responsesParam(refusal.error.param, read.origins) }
    if (result.kind !== 'finished') return result
    const f = result.finished
    if (f.kind === 'delivered' && read.store) {
      const output = outputItems(result.request.requestId, f.reply)
      // The reply is charged and goes out either way: a response that could not be kept is only not found later.
      await this.memory
        .keep(call.caller.keyId, result.request.requestId, read.conversation, output)
        .catch((err: unknown) => this.log(`request ${call.requestId}: its response could not be kept`, err))
    }
    return Object.assign(result, { read })
  }
}
