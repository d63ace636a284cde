import type { FastifyInstance, FastifyReply } from 'fastify'
import type { Finished } from '../../gateway/charge.js'
import type { Admitted } from '../../gateway/context.js'
import type { ReadResponses } from '../../gateway/responses/read.js'
import type { ResponsesResult, ResponsesService } from '../../gateway/responses/service.js'
import type { Tuning } from '../../config.js'
import { sendError } from '../errors.js'
import type { KeyCheck } from '../caller.js'
import type { Intake } from '../intake.js'
import { deliveredResponse, frameOf } from '../responses-body.js'
import { ResponsesSse } from '../responses-sse.js'
import { upstreamUntilFirstEvent } from '../../gateway/trace.js'
import { answer, callOf, observeGone, plainUndelivered } from './life.js'

export interface ResponsesRouteDeps {
  responses: ResponsesService
  tuning: Pick<Tuning, 'keepAliveMs' | 'stallTimeoutMs'>
  keyCheck: KeyCheck
  intake: Intake
}

/**
 * POST /v1/responses: the same request life as chat completions (`life.ts`); the body is read as a chat request by
 * the Responses service, and the reply encoded as a response object or the Responses event stream.
 */
export function responsesRoutes(app: FastifyInstance, { responses, tuning, keyCheck, intake }: ResponsesRouteDeps) {
  app.post('/v1/responses', { onRequest: keyCheck }, async (req, reply) => {
    const call = callOf(req, reply, intake, (r: Admitted, read: ReadResponses) => {
      const trace = call.trace
      return new ResponsesSse({
        reply,
        requestId: r.requestId,
        frame: frameOf(r, read.echo),
        ...tuning,
        onFirstByte: () => (trace.ttfbMs = reply.elapsedTime),
        upstreamMs: () => upstreamUntilFirstEvent(trace),
      })
    })
    const result = await responses.respond(call).finally(() => observeGone(reply))
    return answer(reply, result, (done) =>
      done.stream instanceof ResponsesSse
        ? streamFinished(reply, done.stream, done.request, done.finished)
        : plainFinished(reply, done),
    )
  })
}

function streamFinished(reply: FastifyReply, sse: ResponsesSse, r: Admitted, f: Finished): FastifyReply {
  switch (f.kind) {
    case 'delivered':
      sse.end(sse.delivered(r, f))
      return reply
    case 'refused':
      // Before the status line went out, a plain HTTP error; after it, response.failed.
      if (!sse.headersSent) {
        sse.stopKeepAlive()
        return sendError(reply, f.error)
      }
      sse.end(
        sse.failed(f.error.code === 'provider_output_invalid' ? f.error.code : 'stream_interrupted', f.error.message),
      )
      return reply
    case 'broken':
      sse.end(sse.failed(f.code, f.message))
      return reply
    case 'closed':
      sse.end()
      return reply
  }
}

async function plainFinished(
  reply: FastifyReply,
  result: Extract<ResponsesResult, { kind: 'finished' }>,
): Promise<FastifyReply> {
  const { request: r, finished: f, read } = result
  if (f.kind !== 'delivered') return plainUndelivered(reply, f)
  const text = JSON.stringify(deliveredResponse(frameOf(r, read!.echo), r, f))
  // Kept before it is sent: a retry under the same idempotency key after a crash gets this reply again.
  await result.remember?.(text)
  return reply.header('content-type', 'application/json; charset=utf-8').send(text)
}
