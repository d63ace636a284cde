import type { FastifyInstance } from 'fastify'
import type { ChatCompletion } from '../../protocol/chat.js'
import type { Delivered } from '../../gateway/charge.js'
import type { Admitted } from '../../gateway/context.js'
import type { ChatPipeline } from '../../gateway/pipeline.js'
import { upstreamUntilFirstEvent } from '../../gateway/trace.js'
import { completionId } from '../../ids/request-id.js'
import type { Tuning } from '../../config.js'
import { ChatStream, type ChunkIdentity } from '../sse.js'
import type { KeyCheck } from '../caller.js'
import type { Intake } from '../intake.js'
import { fingerprintFor, svcOf } from '../reply-svc.js'
import { answerChat, type ReplyEncoding } from '../answer.js'
import { callOf, observeGone } from '../chat-call.js'

export interface ChatRouteDeps {
  pipeline: ChatPipeline
  tuning: Pick<Tuning, 'keepAliveMs' | 'stallTimeoutMs'>
  keyCheck: KeyCheck
  intake: Intake
}

/** POST /v1/chat/completions: the key check takes the request in; the pipeline serves it; its events encoded here. */
export function chatRoutes(app: FastifyInstance, { pipeline, tuning, keyCheck, intake }: ChatRouteDeps): void {
  app.post('/v1/chat/completions', { onRequest: keyCheck }, async (req, reply) => {
    const call = callOf(req, reply, intake)
    const trace = call.trace
    const encoding: ReplyEncoding = {
      stream: (r) =>
        new ChatStream({
          reply,
          identity: identityOf(r),
          requestId: r.requestId,
          fingerprint: fingerprintFor(r),
          svc: (d) => svcOf(r, d),
          ...tuning,
          onFirstByte: () => (trace.ttfbMs = reply.elapsedTime),
          upstreamMs: () => upstreamUntilFirstEvent(trace),
        }),
      plain: (r, charged) => JSON.stringify(completionOf(r, charged.delivered)),
    }
    try {
      return await answerChat(reply, call.cancel, await pipeline.chat(call), encoding)
    } finally {
      observeGone(reply)
    }
  })
}

function identityOf(r: Admitted): ChunkIdentity {
  return { id: completionId(r.requestId), created: Math.floor(r.startedAt / 1000), model: r.prepared.model }
}

/** A delivered plain reply: its identity, fingerprint, the one choice, usage and svc. */
function completionOf(r: Admitted, f: Delivered): ChatCompletion {
  const p = f.reply
  const content = p.content === '' && p.toolCalls.length ? null : p.content
  const message = {
    role: 'assistant' as const,
    content,
    ...(p.reasoning !== '' ? { reasoning_content: p.reasoning } : {}),
    ...(p.toolCalls.length ? { tool_calls: p.toolCalls } : {}),
  }
  const logprobs = p.logprobs ? { content: p.logprobs, refusal: null } : null
  const { id, created, model } = identityOf(r)
  return {
    id,
    object: 'chat.completion',
    created,
    model,
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
    svc: svcOf(r, f),
  }
}
