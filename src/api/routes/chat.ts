import type { FastifyInstance, FastifyReply } from 'fastify'
import type { ChatCompletion, ReplySvc } from '../../protocol/chat.js'
import { apiError, type ApiError } from '../../protocol/errors.js'
import { formatUsdc } from '../../money/usdc.js'
import { routingStatus, type Delivered, type Finished } from '../../gateway/charge.js'
import { newTrace } from '../../gateway/trace.js'
import type { Admitted } from '../../gateway/context.js'
import type { ChatPipeline, ChatResult } from '../../gateway/pipeline.js'
import type { Offer } from '../../routing/catalog.js'
import { Cancel } from '../../providers/cancel.js'
import { completionId } from '../../ids/request-id.js'
import { receiptId } from '../../receipts/typed-data.js'
import type { Tuning } from '../../config.js'
import { sendError } from '../errors.js'
import { DONE, SseReply, type ChunkIdentity } from '../sse.js'
import { callerOf, type KeyCheck } from '../caller.js'
import type { Intake } from '../intake.js'

export interface ChatRouteDeps {
  pipeline: ChatPipeline
  tuning: Pick<Tuning, 'keepAliveMs' | 'stallTimeoutMs'>
  keyCheck: KeyCheck
  intake: Intake
}

/** POST /v1/chat/completions: the key check takes the request in; the pipeline serves it; the reply is encoded here. */
export function chatRoutes(app: FastifyInstance, { pipeline, tuning, keyCheck, intake }: ChatRouteDeps): void {
  app.post('/v1/chat/completions', { onRequest: keyCheck }, async (req, reply) => {
    if (req.intake) intake.bodyRead(req.intake)
    const cancel = cancelOnClose(reply)
    const idempotencyKey = req.headers['idempotency-key']
    const trace = (req.trace = newTrace())
    const result = await pipeline
      .chat({
        trace,
        body: req.body,
        bodySha256: req.bodySha256,
        caller: callerOf(req),
        requestId: req.id,
        cancel,
        gone: () => reply.raw.destroyed,
        headers: (h) => void reply.headers(h),
        ...(typeof idempotencyKey === 'string' ? { idempotencyKey } : {}),
        openStream: (r) =>
          new SseReply({
            reply,
            identity: identityOf(r),
            requestId: r.requestId,
            fingerprint: fingerprintFor(r),
            ...tuning,
            onFirstByte: () => (trace.ttfbMs = reply.elapsedTime),
          }),
      })
      .finally(() => {
        if (reply.raw.destroyed && !reply.raw.writableFinished) reply.observeAborted?.()
      })
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
        return result.stream instanceof SseReply
          ? streamFinished(reply, result.stream, result.request, result.finished)
          : plainFinished(reply, result)
    }
  })
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

function identityOf(r: Admitted): ChunkIdentity {
  return { id: completionId(r.requestId), created: Math.floor(r.startedAt / 1000), model: r.prepared.model }
}

/** svc object of a delivered reply; the routing description on cortex replies. */
function svcOf(r: Admitted, d: Delivered): ReplySvc {
  const provider = d.reply.offer.provider
  const svc: ReplySvc = {
    cost_usdc: formatUsdc(d.cost),
    provider,
    request_id: r.requestId,
    receipt_id: receiptId(r.requestId),
  }
  if (r.prepared.plan.cortex) {
    const status = routingStatus(d)
    svc.routing = { model: d.servedModel, served_by: provider, vendor_fallback: d.reply.offer.managed, status }
  }
  return svc
}

function fingerprintFor(r: Admitted): (offer: Offer) => string {
  return r.prepared.plan.cortex ? (offer) => `cortex:${offer.modelId}` : (offer) => offer.fingerprint
}

/**
 * A failure before the stream's status line went out is a plain HTTP error; after it, an error chunk and [DONE]. A
 * stream's error chunks carry only `provider_output_invalid` or `stream_interrupted`, whose message says why.
 */
function failStream(reply: FastifyReply, sse: SseReply, err: ApiError): FastifyReply {
  if (!sse.headersSent) {
    sse.stopKeepAlive()
    return sendError(reply, err)
  }
  sse.end(
    sse.encoder.error(err.code === 'provider_output_invalid' ? err.code : 'stream_interrupted', err.message) + DONE,
  )
  return reply
}

function streamFinished(reply: FastifyReply, sse: SseReply, r: Admitted, f: Finished): FastifyReply {
  const enc = sse.encoder
  switch (f.kind) {
    case 'delivered':
      // Tool calls went out before the capture (`SseReply.complete`): then `completion` is empty.
      sse.end(sse.completion(f.reply) + enc.usage(f.usage) + enc.svc(svcOf(r, f)) + DONE)
      return reply
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

async function plainFinished(
  reply: FastifyReply,
  result: Extract<ChatResult, { kind: 'finished' }>,
): Promise<FastifyReply> {
  const { request: r, finished: f } = result
  switch (f.kind) {
    case 'delivered': {
      const { id, created, model } = identityOf(r)
      const body: ChatCompletion = {
        id,
        object: 'chat.completion',
        created,
        model,
        ...completionOf(r, f),
        svc: svcOf(r, f),
      }
      const text = JSON.stringify(body)
      // Kept before it is sent: a retry under the same idempotency key after a crash gets this reply again.
      await result.remember?.(text)
      return reply.header('content-type', 'application/json; charset=utf-8').send(text)
    }
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

/** The fields of a plain reply after its identity: fingerprint, the one choice, usage. */
function completionOf(r: Admitted, f: Delivered): Pick<ChatCompletion, 'system_fingerprint' | 'choices' | 'usage'> {
  const p = f.reply
  const content = p.content === '' && p.toolCalls.length ? null : p.content
  const message = { role: 'assistant' as const, content, ...(p.toolCalls.length ? { tool_calls: p.toolCalls } : {}) }
  const logprobs = p.logprobs ? { content: p.logprobs, refusal: null } : null
  return {
    system_fingerprint: fingerprintFor(r)(p.offer),
    choices: [
      {
        index: 0,
        message,
        ...(r.prepared.request.logprobs === true ? { logprobs } : {}),
        finish_reason: p.finish,
      },
    ],
    usage: f.usage,
  }
}
