import type { FastifyInstance } from 'fastify'
import type { ResponsesService } from '../../gateway/responses/service.js'
import { upstreamUntilFirstEvent } from '../../gateway/trace.js'
import type { Tuning } from '../../config.js'
import type { KeyCheck } from '../caller.js'
import type { Intake } from '../intake.js'
import { deliveredResponse, frameOf } from '../responses-body.js'
import { ResponsesSse } from '../responses-sse.js'
import { answerChat, type ReplyEncoding } from '../answer.js'
import { callOf, observeGone } from '../chat-call.js'

export interface ResponsesRouteDeps {
  responses: ResponsesService
  tuning: Pick<Tuning, 'keepAliveMs' | 'stallTimeoutMs'>
  keyCheck: KeyCheck
  intake: Intake
}

/**
 * POST /v1/responses: the same request life as chat completions; the body is read as a chat request by the Responses
 * service, and the reply's events encoded as a response object or the Responses event stream.
 */
export function responsesRoutes(app: FastifyInstance, { responses, tuning, keyCheck, intake }: ResponsesRouteDeps) {
  app.post('/v1/responses', { onRequest: keyCheck }, async (req, reply) => {
    const call = callOf(req, reply, intake)
    const trace = call.trace
    try {
      const result = await responses.respond(call)
      const echo = result.read?.echo
      const encoding: ReplyEncoding = {
        stream: (r) =>
          new ResponsesSse({
            reply,
            requestId: r.requestId,
            request: r,
            frame: frameOf(r, echo!),
            ...tuning,
            onFirstByte: () => (trace.ttfbMs = reply.elapsedTime),
            upstreamMs: () => upstreamUntilFirstEvent(trace),
          }),
        plain: (r, charged) => JSON.stringify(deliveredResponse(frameOf(r, echo!), r, charged.delivered)),
      }
      return await answerChat(reply, call.cancel, result, encoding)
    } finally {
      observeGone(reply)
    }
  })
}
