import type { FastifyReply, FastifyRequest } from 'fastify'
import { apiError } from '../../protocol/errors.js'
import type { Finished } from '../../gateway/charge.js'
import type { ChatCall, ChatResult } from '../../gateway/pipeline.js'
import { newTrace } from '../../gateway/trace.js'
import { Cancel } from '../../providers/cancel.js'
import { sendError } from '../errors.js'
import { callerOf } from '../caller.js'
import type { Intake } from '../intake.js'

/**
 * The request life every API's route shares (chat completions, Responses): the call the gateway is handed, and the
 * answers that do not depend on how a reply is encoded. The routes differ only in reading the body and encoding.
 */

/** A pipeline call from its request, but for how its stream opens (the API's own encoder). */
export function callOf<S>(
  req: FastifyRequest,
  reply: FastifyReply,
  intake: Intake,
  openStream: S,
): Omit<ChatCall, 'openStream'> & { openStream: S } {
  if (req.intake) intake.bodyRead(req.intake)
  const idempotencyKey = req.headers['idempotency-key']
  return {
    trace: (req.trace = newTrace()),
    body: req.body,
    bodySha256: req.bodySha256,
    caller: callerOf(req),
    requestId: req.id,
    cancel: cancelOnClose(reply),
    gone: () => reply.raw.destroyed,
    headers: (h) => void reply.headers(h),
    ...(typeof idempotencyKey === 'string' ? { idempotencyKey } : {}),
    openStream,
  }
}

/** Cancels the request's upstream when its client goes before the reply is whole. */
function cancelOnClose(reply: FastifyReply): Cancel {
  const cancel = new Cancel()
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) cancel.abort()
  })
  // A client that left before this listener was added has closed the response already.
  if (reply.raw.destroyed) cancel.abort()
  return cancel
}

/** Once the gateway is done with a request: one whose client left before its reply was whole is observed so. */
export function observeGone(reply: FastifyReply): void {
  if (reply.request.trace) reply.request.trace.underway = false
  if (reply.raw.destroyed && !reply.raw.writableFinished) reply.observeAborted?.()
}

type FinishedResult<R> = Extract<R, { kind: 'finished' }>

/** Answers what any API answers alike (left, refused, replayed); a finished request is encoded by `finished`. */
export function answer<R extends ChatResult>(
  reply: FastifyReply,
  result: R,
  finished: (result: FinishedResult<R>) => FastifyReply | Promise<FastifyReply>,
): FastifyReply | Promise<FastifyReply> {
  switch (result.kind) {
    case 'abandoned':
      return reply
    case 'refused':
      return sendError(reply, result.error)
    case 'replay':
      return reply
        .code(result.status)
        .header('idempotent-replayed', 'true')
        .header('content-type', 'application/json; charset=utf-8')
        .send(result.body)
    case 'finished':
      return finished(result as FinishedResult<R>)
  }
}

/** A plain (not streamed) request that delivered nothing: its error, or a closed connection for a client gone. */
export function plainUndelivered(reply: FastifyReply, f: Exclude<Finished, { kind: 'delivered' }>): FastifyReply {
  switch (f.kind) {
    case 'refused':
      return sendError(reply, f.error)
    case 'broken': {
      const code = f.code === 'provider_output_invalid' ? 'provider_output_invalid' : 'no_capacity'
      return sendError(reply, apiError(code, f.message, { retryAfter: 1 }))
    }
    case 'closed':
      reply.hijack()
      reply.raw.destroy()
      return reply
  }
}
