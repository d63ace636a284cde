import type { FastifyInstance } from 'fastify'
import { apiError, clipped, isApiError } from '../../protocol/errors.js'
import type { UsageQueries } from '../../usage/query.js'
import { sendError } from '../errors.js'
import { callerOf, type KeyCheck } from '../caller.js'

const MAX_LIMIT = 100
const DEFAULT_LIMIT = 20

/** The account's live keys, their limits and what each used this minute (`GET /v1/usage/keys`). */
export type KeyLimits = (accountId: number) => Promise<unknown>

/**
 * GET /v1/usage (newest first, paginated), /v1/usage/refusals, /v1/usage/keys and /v1/usage/{request_id}, for the
 * key's owner.
 */
export function usageRoutes(
  app: FastifyInstance,
  { usage, keyLimits }: { usage: UsageQueries; keyLimits: KeyLimits },
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
    const record = await usage.record(callerOf(req).accountId, req.params.id)
    if (record) return record
    const message = `No usage record ${clipped(req.params.id)} for this account.`
    return sendError(reply, apiError('feature_not_supported', message, { param: 'request_id', status: 404 }))
  })
}
