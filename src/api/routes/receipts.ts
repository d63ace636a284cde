import type { FastifyInstance } from 'fastify'
import { apiError, clipped } from '../../protocol/errors.js'
import type { ReceiptBook } from '../../receipts/book.js'
import { requestIdOf } from '../../receipts/typed-data.js'
import { sendError } from '../errors.js'
import { callerOf, type KeyCheck } from '../caller.js'

/**
 * GET /v1/receipts/signer (no key: anyone verifying a receipt reads it) and GET /v1/usage/{request_id}/proof, for the
 * key's owner.
 */
export function receiptRoutes(app: FastifyInstance, book: ReceiptBook, onRequest: KeyCheck): void {
  app.get('/v1/receipts/signer', async () => ({
    object: 'receipt.signers',
    rail: book.rail,
    domain: book.domain,
    address: book.signers[0]!.address,
    signers: book.signers,
  }))

  app.get<{ Params: { id: string } }>('/v1/usage/:id/proof', { onRequest }, async (req, reply) => {
    const requestId = requestIdOf(req.params.id)
    const proof = await book.proof(callerOf(req).accountId, requestId)
    if (!('kind' in proof)) return proof
    const id = clipped(req.params.id)
    const [status, message] =
      proof.kind === 'unknown'
        ? [404, `No usage record ${id} for this account.`]
        : proof.kind === 'uncharged'
          ? [
              404,
              `Nothing was charged for ${id} (outcome ${proof.outcome}), so no settlement batch commits to it: its signed receipt (GET /v1/usage/${id}) is the whole record.`,
            ]
          : [
              409,
              `The charge of ${id} is not settled yet: ${proof.why}. Its proof exists once its settlement batch is settled; retry after the next settlement pass.`,
            ]
    return sendError(reply, apiError('feature_not_supported', message, { param: 'request_id', status }))
  })
}
