import type { FastifyInstance, FastifyReply } from 'fastify'
import type { ChatCompletion, ReplySvc } from '../../protocol/chat.js'
import { apiError, isApiError, type ApiError } from '../../protocol/errors.js'
import { formatUsdc } from '../../ledger/money.js'
import { admit, type Caller } from '../../gateway/admission.js'
import type { Gateway } from '../../gateway/gateway.js'
import { prepare, type Prepared } from '../../gateway/prepare.js'
import { landed, noCapacityBeforeWork, requestUsage, type Delivered, type Finished } from '../../gateway/settle.js'
import { planOfferCount } from '../../routing/route.js'
import type { Offer } from '../../routing/catalog.js'
import { sendError } from '../errors.js'
import { DONE, SseReply } from '../sse.js'
import { completionId } from '../request-id.js'
import { callerOf, type keyCheck } from '../caller.js'
import type { Intake } from '../intake.js'
import { Cancel } from '../../providers/cancel.js'
import { CountAbandoned } from '../../metering/tokens.js'

/** svc object of a delivered reply; routing description on cortex replies (spec §2.2, DESIGN §3). */
function svcOf(p: Prepared, d: Delivered, requestId: string): ReplySvc {
  const provider = d.reply.offer.provider
  const svc: ReplySvc = { cost_usdc: formatUsdc(d.cost), provider, request_id: requestId }
  if (p.plan.cortex) {
    const status = d.managedWhy ? `managed:${d.managedWhy}` : d.failedTargets > 0 ? `failover:${d.failedTargets}` : 'available'
    svc.routing = { model: d.servedModel, served_by: provider, vendor_fallback: d.reply.offer.managed, status }
  }
  return svc
}

function fingerprintFor(p: Prepared): (offer: Offer) => string {
  return p.plan.cortex ? (offer) => `cortex:${offer.modelId}` : (offer) => offer.fingerprint
}

/** POST /v1/chat/completions: authenticate and take in (`Intake`), validate, admit, serve, settle, reply (spec §4.1). */
export function chatRoutes(app: FastifyInstance, gw: Gateway, onRequest: ReturnType<typeof keyCheck>, intake: Intake): void {
  app.post('/v1/chat/completions', { onRequest }, (req, reply) => {
    if (req.intake) intake.bodyRead(req.intake)
    return serve(gw, req.body, reply, callerOf(req), req.id)
  })
}

/** Validates, admits, serves and settles one request. */
async function serve(gw: Gateway, body: unknown, reply: FastifyReply, caller: Caller, requestId: string): Promise<FastifyReply> {
  const startedAt = gw.now()
  let prepared = prepare(body, gw.catalog, gw.health, () => reply.raw.destroyed)
  // Only a long prompt's count goes over several turns: the rest are spared a promise.
  if (prepared instanceof Promise) {
    try {
      prepared = await prepared
    } catch (err) {
      // Its client left while its prompt was counted: nothing was held, nothing is recorded, no one is answered.
      if (err instanceof CountAbandoned) return reply
      throw err
    }
  }
  if (isApiError(prepared)) return sendError(reply, prepared)
  if (planOfferCount(prepared.plan) === 0) {
    await recordRefusal(gw, caller, prepared, requestId, startedAt, 'no_capacity')
    return sendError(reply, noCapacityBeforeWork(gw.health, prepared))
  }
  let admitted: Awaited<ReturnType<typeof admit>>
  try {
    admitted = await admit(gw.store, caller, prepared, requestId, { owner: gw.lifecycle.id, now: startedAt, holdTtlMs: gw.tuning.holdTtlSeconds * 1000 })
  } catch (err) {
    // The hold may have been written before the store failed: release it, or the live instance would keep it.
    await failedInternally(gw, err, caller, prepared, requestId, startedAt, 'no_capacity')
    return sendError(reply, internalError(requestId))
  }
  if (isApiError(admitted)) {
    if (admitted.code === 'insufficient_quota') await recordRefusal(gw, caller, prepared, requestId, startedAt, 'insufficient_quota')
    return sendError(reply, admitted)
  }
  // Its hold's lease is extended while it is served; a hold its request leaves open (a failed release) expires.
  gw.lifecycle.admitted(requestId)
  try {
    return await serveAdmitted(gw, reply, caller, prepared, admitted.amount, requestId, startedAt)
  } finally {
    gw.lifecycle.settled(requestId)
  }
}

/** Serves an admitted request and settles it: capture or release, then the reply (DESIGN §4, §6). */
async function serveAdmitted(gw: Gateway, reply: FastifyReply, caller: Caller, prepared: Prepared, held: bigint, requestId: string, startedAt: number): Promise<FastifyReply> {
  const cancel = new Cancel()
  const onClose = () => {
    if (!reply.raw.writableFinished) cancel.abort()
  }
  reply.raw.once('close', onClose)
  // A client that left while the request was checked and admitted closed the response before this listener.
  if (reply.raw.destroyed) onClose()
  const identity = { id: completionId(requestId), created: Math.floor(startedAt / 1000), model: prepared.model }
  if (prepared.stream) {
    const sse = new SseReply(reply, identity, requestId, fingerprintFor(prepared), gw.tuning.keepAliveMs, gw.tuning.stallTimeoutMs)
    let finished: Finished
    try {
      finished = await gw.run(caller, prepared, held, requestId, startedAt, sse, cancel)
    } catch (err) {
      const charged = await failedInternally(gw, err, caller, prepared, requestId, startedAt, sse.headersSent ? 'stream_interrupted' : 'no_capacity')
      if (charged) return streamFinished(reply, sse, prepared, charged, requestId)
      return failStream(reply, sse, internalError(requestId))
    }
    return streamFinished(reply, sse, prepared, finished, requestId)
  }
  let finished: Finished
  try {
    finished = await gw.run(caller, prepared, held, requestId, startedAt, undefined, cancel)
  } catch (err) {
    const charged = await failedInternally(gw, err, caller, prepared, requestId, startedAt, 'no_capacity')
    if (charged) return plainFinished(reply, prepared, charged, identity, requestId)
    return sendError(reply, internalError(requestId))
  }
  return plainFinished(reply, prepared, finished, identity, requestId)
}

/**
 * A failure before the stream's status line went out is a plain HTTP error; after it (keep-alives sent it before any
 * content), an error chunk and [DONE]. A stream's error chunks carry only the spec's two codes (§6): invalid output
 * keeps its own, any other failure is the stream cut short, `stream_interrupted`, its message saying why.
 */
function failStream(reply: FastifyReply, sse: SseReply, err: ApiError): FastifyReply {
  if (!sse.headersSent) {
    sse.stopKeepAlive()
    return sendError(reply, err)
  }
  sse.end(sse.encoder.error(err.code === 'provider_output_invalid' ? err.code : 'stream_interrupted', err.message) + DONE)
  return reply
}

function streamFinished(reply: FastifyReply, sse: SseReply, p: Prepared, f: Finished, requestId: string): FastifyReply {
  const enc = sse.encoder
  switch (f.kind) {
    case 'delivered': {
      // Tool calls went out before the capture (`SseReply.complete`): then `completion` is empty.
      sse.end(sse.completion(f.reply) + enc.usage(f.usage) + enc.svc(svcOf(p, f, requestId)) + DONE)
      return reply
    }
    case 'refused':
      return failStream(reply, sse, f.error)
    case 'broken':
      sse.end(enc.error(f.code, f.message) + DONE)
      return reply
    case 'closed':
      sse.end()
      return reply
  }
}

function plainFinished(reply: FastifyReply, p: Prepared, f: Finished, identity: { id: string; created: number; model: string }, requestId: string): FastifyReply {
  switch (f.kind) {
    case 'delivered': {
      const r = f.reply
      const body: ChatCompletion = {
        id: identity.id,
        object: 'chat.completion',
        created: identity.created,
        model: identity.model,
        system_fingerprint: fingerprintFor(p)(r.offer),
        choices: [{
          index: 0,
          message: { role: 'assistant', content: r.content === '' && r.toolCalls.length ? null : r.content, ...(r.toolCalls.length ? { tool_calls: r.toolCalls } : {}) },
          ...(p.request.logprobs === true ? { logprobs: r.logprobs ? { content: r.logprobs, refusal: null } : null } : {}),
          finish_reason: r.finish,
        }],
        usage: f.usage,
        svc: svcOf(p, f, requestId),
      }
      return reply.header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body))
    }
    case 'refused':
      return sendError(reply, f.error)
    case 'broken':
      return sendError(reply, apiError(f.code === 'provider_output_invalid' ? 'provider_output_invalid' : 'no_capacity', f.message, { retryAfter: 1 }))
    case 'closed':
      reply.hijack()
      reply.raw.destroy()
      return reply
  }
}

async function recordRefusal(gw: Gateway, caller: Caller, p: Prepared, requestId: string, startedAt: number, outcome: 'no_capacity' | 'insufficient_quota'): Promise<void> {
  await gw.store.ledger.record(requestUsage(requestId, caller, p, startedAt, gw.now(), outcome))
}

/**
 * A bug or an unreachable store interrupted the request: log it and release its hold (best effort), charging
 * nothing. The usage record (which the client is told to check) carries what the client was answered. Unless its
 * capture had landed though the store's answer was lost: then the reply it charged for is what the client gets.
 */
async function failedInternally(gw: Gateway, err: unknown, caller: Caller, p: Prepared, requestId: string, startedAt: number, outcome: 'no_capacity' | 'stream_interrupted'): Promise<Delivered | undefined> {
  const now = gw.now()
  const released = await gw.store.ledger.release(requestId, now, requestUsage(requestId, caller, p, startedAt, now, outcome)).catch(() => undefined)
  const charged = await landed(gw.store, caller.accountId, err, released)
  if (charged) gw.log(`request ${requestId}: the store did not answer its capture, which had landed; the reply is delivered as charged`)
  else gw.log(`request ${requestId} failed`, err)
  return charged
}

export function internalError(requestId: string) {
  return apiError('no_capacity', `The gateway could not complete the request because of an internal error (${requestId}); check GET /v1/usage/${requestId} before retrying.`, { retryAfter: 1 })
}

