import type { FastifyInstance } from 'fastify'
import { apiError, clipped, isApiError } from '../../protocol/errors.js'
import { sendError } from '../../api/errors.js'
import { requestIdOf } from '../../receipts/typed-data.js'
import type { ReceiptBook } from '../../receipts/book.js'
import type { Store } from '../../store/store.js'
import { viewedAccount } from './x402.js'

/**
 * A request's receipt as a file to keep (GET /portal/api/usage/{id}/receipt): the signed receipt, and its proof once
 * its batch is settled (null before), ready for `svc receipt verify`.
 */
export function receiptDownloadRoutes(api: FastifyInstance, receipts: ReceiptBook, store: Store): void {
  api.get<{ Params: { id: string } }>('/usage/:id/receipt', async (req, reply) => {
    const accountId = await viewedAccount(req, store)
    if (isApiError(accountId)) return sendError(reply, accountId)
    const requestId = requestIdOf(req.params.id)
    const signed = await receipts.signed(accountId, requestId)
    if (!signed) {
      const message = `No usage record ${clipped(req.params.id)} for this account.`
      return sendError(reply, apiError('feature_not_supported', message, { param: 'request_id', status: 404 }))
    }
    const proof = await receipts.proof(accountId, requestId)
    return reply
      .header('content-disposition', `attachment; filename="${signed.receipt.receipt_id}.json"`)
      .send({ ...signed, proof: 'kind' in proof ? null : proof })
  })
}
