import type { FastifyInstance } from 'fastify'
import { apiError, clipped, isApiError } from '../../protocol/errors.js'
import type { UsageQueries } from '../../usage/query.js'
import { sendError } from '../errors.js'
import { callerOf, type KeyCheck } from '../caller.js'
import type { ReceiptBook } from '../../receipts/book.js'
import { requestIdOf } from '../../receipts/typed-data.js'

const MAX_LIMIT = 100
const DEFAULT_LIMIT = 20

/** The account's live keys, their limits and what each used this minute (`GET /v1/usage/keys`). */
export type KeyLimits = (accountId: number) => Promise<unknown>

/**
 * GET /v1/usage (newest first, paginated), /v1/usage/refusals, /v1/usage/keys and /v1/usage/{request_id} (or its
 * receipt id) with its signed receipt, for the key's owner.
 */
export function usageRoutes(
  app: FastifyInstance,
  { usage, keyLimits, receipts }: { usage: UsageQueries; keyLimits: KeyLimits; receipts: ReceiptBook },
  onRequest: KeyCheck,
): void {
  app.get<{ Querystring: Record<string, string | undefined> }>('/v1/usage', { onRequest }, async (req, reply) => {
    const page = await usage.page(callerOf(req).accountId, {
      query: req.query,
      max: MAX_LIMIT,
      fallback: DEFAULT_LIMIT,
    })
    return isApiError(page) ? sendError(reply, page) : page
  })

  app.get<{ Querystring: Record<string, string | undefined> }>(
    '/v1/usage/refusals',
    { onRequest },
    async (req, reply) => {
      const counts = await usage.refused(callerOf(req).accountId, req.query)
      return isApiError(counts) ? sendError(reply, counts) : counts
    },
  )

  app.get('/v1/usage/keys', { onRequest }, async (req) => keyLimits(callerOf(req).accountId))

  app.get<{ Params: { id: string } }>('/v1/usage/:id', { onRequest }, async (req, reply) => {
    const { accountId } = callerOf(req)
    const requestId = requestIdOf(req.params.id)
    const record = await usage.record(accountId, requestId)
    // A request cut off by its instance's death has a record but no row yet: its receipt comes with its row.
    if (record) return { ...record, receipt: (await receipts.signed(accountId, requestId)) ?? null }
    const message = `No usage record ${clipped(req.params.id)} for this account.`
    return sendError(reply, apiError('feature_not_supported', message, { param: 'request_id', status: 404 }))
  })
}
