import type { FastifyInstance } from 'fastify'
import type { EmbeddingsService } from '../../gateway/embeddings.js'
import { base64Vector, type EmbeddingsReply } from '../../protocol/embeddings.js'
import { formatUsdc } from '../../money/usdc.js'
import { receiptId } from '../../receipts/typed-data.js'
import type { KeyCheck } from '../caller.js'
import type { Intake } from '../intake.js'
import { sendError } from '../errors.js'
import { callOf, observeGone } from '../chat-call.js'

export interface EmbeddingsRouteDeps {
  embeddings: EmbeddingsService
  keyCheck: KeyCheck
  intake: Intake
}

/** POST /v1/embeddings: the key check (or x402) takes the request in; the service embeds it; OpenAI's reply shape. */
export function embeddingsRoutes(app: FastifyInstance, { embeddings, keyCheck, intake }: EmbeddingsRouteDeps): void {
  app.post('/v1/embeddings', { onRequest: keyCheck }, async (req, reply) => {
    const call = callOf(req, reply, intake)
    try {
      const result = await embeddings.embed({ ...call, bodySha256: call.bodySha256 ?? null, headers: call.headers! })
      if (result.kind === 'refused') return sendError(reply, result.error)
      const base64 = result.request.encoding === 'base64'
      const body: EmbeddingsReply = {
        object: 'list',
        data: result.vectors.map((v, index) => ({
          object: 'embedding',
          index,
          embedding: base64 ? base64Vector(v) : v,
        })),
        model: result.request.model,
        usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
        svc: {
          request_id: call.requestId,
          receipt_id: receiptId(call.requestId),
          cost_usdc: formatUsdc(result.cost),
          provider: result.provider,
        },
      }
      return reply.header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body))
    } finally {
      observeGone(reply)
    }
  })
}
