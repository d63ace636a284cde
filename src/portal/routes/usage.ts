import type { FastifyInstance } from 'fastify'
import { apiError, isApiError } from '../../protocol/errors.js'
import { sendError } from '../../api/errors.js'
import { formatUsdc } from '../../money/usdc.js'
import { repeatedParam, usageFilterOf } from '../../usage/query.js'
import { DAY_MS } from '../../store/usage.js'
import { countFrom } from '../../protocol/counts.js'
import { viewedAccount, withoutAccount } from './x402.js'
import type { PortalContext } from '../context.js'

const MAX_LIMIT = 200
const DEFAULT_LIMIT = 50
const MAX_DAYS = 90

type Query = Record<string, string | undefined>

/**
 * The signed-in account's requests (newest first, filtered by key and model), their totals and spend per day; with
 * `?account=x402`, those its wallet paid for with x402.
 */
export function usageRoutes(api: FastifyInstance, ctx: PortalContext): void {
  const { store, usage, now } = ctx

  api.get<{ Querystring: Query }>('/usage', async (req, reply) => {
    const accountId = await viewedAccount(req, store)
    if (isApiError(accountId)) return sendError(reply, accountId)
    const page = await usage.page(accountId, {
      query: withoutAccount(req.query),
      max: MAX_LIMIT,
      fallback: DEFAULT_LIMIT,
    })
    return isApiError(page) ? sendError(reply, page) : page
  })

  api.get<{ Querystring: Query }>('/usage/summary', async (req, reply) => {
    const q = req.query
    const repeated = repeatedParam(q)
    if (repeated) return sendError(reply, repeated)
    const days = q.days === undefined ? 14 : countFrom(q.days, MAX_DAYS)
    if (days === null) {
      return sendError(
        reply,
        apiError('feature_not_supported', `days must be an integer from 1 to ${MAX_DAYS}.`, { param: 'days' }),
      )
    }
    const accountId = await viewedAccount(req, store)
    if (isApiError(accountId)) return sendError(reply, accountId)
    const filter = usageFilterOf(q)
    const first = (Math.floor(now() / DAY_MS) - days + 1) * DAY_MS
    const { totals, daily: spent } = await store.usage.summary(accountId, filter, first)
    const byDay = new Map(spent.map((d) => [d.day, d]))
    // Every day of the window, so a chart shows quiet days as zero.
    const daily = Array.from({ length: days }, (_, i) => {
      const day = first + i * DAY_MS
      const d = byDay.get(day)
      return {
        date: new Date(day).toISOString().slice(0, 10),
        requests: d?.requests ?? 0,
        cost_usdc: formatUsdc(d?.cost ?? 0n),
      }
    })
    return {
      object: 'portal.usage_summary',
      totals: {
        requests: totals.requests,
        prompt_tokens: totals.promptTokens,
        completion_tokens: totals.completionTokens,
        cost_usdc: formatUsdc(totals.cost),
      },
      daily,
    }
  })
}
