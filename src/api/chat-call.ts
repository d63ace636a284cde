import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ChatCall } from '../gateway/pipeline.js'
import { newTrace } from '../gateway/trace.js'
import { Cancel } from '../providers/cancel.js'
import { callerOf } from './caller.js'
import type { Intake } from './intake.js'

/** The pipeline call of a chat request (chat completions, Responses), from its request. */
export function callOf(req: FastifyRequest, reply: FastifyReply, intake: Intake): ChatCall {
  if (req.intake) intake.bodyRead(req.intake)
  const idempotencyKey = req.headers['idempotency-key']
  const call: ChatCall = {
    trace: (req.trace = newTrace()),
    body: req.body,
    bodySha256: req.bodySha256,
    caller: callerOf(req),
    requestId: req.id,
    cancel: cancelOnClose(reply),
    gone: () => reply.raw.destroyed,
    headers: (h) => void reply.headers(h),
    ...(typeof idempotencyKey === 'string' && !req.keyless ? { idempotencyKey } : {}),
  }
  if (!req.keyless) return call
  // A keyless request has no key to keep an idempotency key under: its payment's nonce serves one request only.
  const signature = req.headers['payment-signature']
  return { ...call, keyless: { signature: typeof signature === 'string' ? signature : undefined, url: urlOf(req) } }
}

/** The request's URL as its client named it (the host it sent, this gateway's scheme). */
function urlOf(req: FastifyRequest): string {
  return `${req.protocol}://${req.host}${req.url}`
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
