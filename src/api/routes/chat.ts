import type { FastifyInstance, FastifyReply } from 'fastify'
import type { ChatCompletion } from '../../protocol/chat.js'
import type { ApiError } from '../../protocol/errors.js'
import type { Delivered, Finished } from '../../gateway/charge.js'
import type { Admitted } from '../../gateway/context.js'
import type { ChatPipeline, ChatResult } from '../../gateway/pipeline.js'
import { completionId } from '../../ids/request-id.js'
import type { Tuning } from '../../config.js'
import { sendError } from '../errors.js'
import { DONE, SseReply, type ChunkIdentity } from '../sse.js'
import type { KeyCheck } from '../caller.js'
import type { Intake } from '../intake.js'
import { fingerprintFor, svcOf } from '../reply-svc.js'
import { upstreamUntilFirstEvent } from '../../gateway/trace.js'
import { answer, callOf, observeGone, plainUndelivered } from './life.js'

export interface ChatRouteDeps {
  pipeline: ChatPipeline
  tuning: Pick<Tuning, 'keepAliveMs' | 'stallTimeoutMs'>
  keyCheck: KeyCheck
  intake: Intake
}

/** POST /v1/chat/completions: the key check takes the request in; the pipeline serves it; the reply is encoded here. */
export function chatRoutes(app: FastifyInstance, { pipeline, tuning, keyCheck, intake }: ChatRouteDeps): void {
  app.post('/v1/chat/completions', { onRequest: keyCheck }, async (req, reply) => {
    const call = callOf(req, reply, intake, (r: Admitted) => {
      const trace = call.trace
      return new SseReply({
        reply,
        identity: identityOf(r),
        requestId: r.requestId,
        fingerprint: fingerprintFor(r),
        ...tuning,
        onFirstByte: () => (trace.ttfbMs = reply.elapsedTime),
        upstreamMs: () => upstreamUntilFirstEvent(trace),
      })
    })
    const result = await pipeline.chat(call).finally(() => observeGone(reply))
    return answer(reply, result, (done) =>
      done.stream instanceof SseReply
        ? streamFinished(reply, done.stream, done.request, done.finished)
        : plainFinished(reply, done),
    )
  })
}

function identityOf(r: Admitted): ChunkIdentity {
  return { id: completionId(r.requestId), created: Math.floor(r.startedAt / 1000), model: r.prepared.model }
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
  if (f.kind !== 'delivered') return plainUndelivered(reply, f)
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
