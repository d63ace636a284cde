import type { FastifyInstance } from 'fastify'
import { isApiError } from '../../protocol/errors.js'
import { chatBodyOfMessages } from '../../protocol/anthropic.js'
import type { ChatPipeline } from '../../gateway/pipeline.js'
import { upstreamUntilFirstEvent } from '../../gateway/trace.js'
import type { Tuning } from '../../config.js'
import type { KeyCheck } from '../caller.js'
import type { Intake } from '../intake.js'
import { sendError } from '../errors.js'
import { answerChat, type ReplyEncoding } from '../answer.js'
import { callOf, observeGone } from '../chat-call.js'
import { anthropicMessage } from '../anthropic-body.js'
import { AnthropicSse } from '../anthropic-sse.js'

export interface MessagesRouteDeps {
  pipeline: ChatPipeline
  tuning: Pick<Tuning, 'keepAliveMs' | 'stallTimeoutMs'>
  keyCheck: KeyCheck
  intake: Intake
}

/**
 * POST /v1/messages: Anthropic's Messages API on the chat request's life. The body is read as the chat request it
 * stands for (`chatBodyOfMessages`), served by the one pipeline, and its events encoded as a Message or Anthropic's
 * event stream; every error in Anthropic's shape (`sendError`).
 */
export function messagesRoutes(app: FastifyInstance, { pipeline, tuning, keyCheck, intake }: MessagesRouteDeps): void {
  app.post('/v1/messages', { onRequest: keyCheck }, async (req, reply) => {
    const call = callOf(req, reply, intake)
    const trace = call.trace
    try {
      const chat = chatBodyOfMessages(req.body)
      if (isApiError(chat)) {
        trace.outcome = chat.code
        return sendError(reply, chat)
      }
      const encoding: ReplyEncoding = {
        stream: (r) =>
          new AnthropicSse({
            reply,
            requestId: r.requestId,
            request: r,
            ...tuning,
            onFirstByte: () => (trace.ttfbMs = reply.elapsedTime),
            upstreamMs: () => upstreamUntilFirstEvent(trace),
          }),
        plain: (r, charged) => JSON.stringify(anthropicMessage(r, charged.delivered)),
      }
      // An idempotency key's retry repeats the Messages body: the same key on another API is another body.
      const result = await pipeline.chat({ ...call, body: chat, keyedBody: req.body })
      return await answerChat(reply, call.cancel, result, encoding)
    } finally {
      observeGone(reply)
    }
  })
}
