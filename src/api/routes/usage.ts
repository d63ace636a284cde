import type { FastifyInstance } from 'fastify'
import { apiError, clipped, isApiError, type ApiError } from '../../protocol/errors.js'
import { formatUsdc } from '../../ledger/money.js'
import type { Gateway } from '../../gateway/gateway.js'
import type { UsageFilter, UsageRecord } from '../../store/usage.js'
import type { Store } from '../../store/store.js'
import { sendError } from '../errors.js'
import { countFrom } from '../../protocol/counts.js'
import { callerOf, type keyCheck } from '../caller.js'

const MAX_LIMIT = 100
const DEFAULT_LIMIT = 20

/** A usage record on the wire. */
export function wireUsage(u: UsageRecord) {
  return {
    object: 'usage.record',
    request_id: u.requestId,
    created: Math.floor(u.createdAt / 1000),
    key_id: u.keyId,
    model: u.model,
    served_model: u.servedModel,
    provider: u.provider,
    stream: u.stream,
    outcome: u.outcome,
    usage: { prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens, total_tokens: u.promptTokens + u.completionTokens },
    upstream_usage: u.upstreamPromptTokens === null ? null : { prompt_tokens: u.upstreamPromptTokens, completion_tokens: u.upstreamCompletionTokens },
    cost_usdc: formatUsdc(u.cost),
    latency_ms: u.latencyMs,
  }
}

/** Refuses a query parameter sent more than once (the parser makes it an array), naming it; null when each is a string. */
export function repeatedParam(query: Record<string, unknown>): ApiError | null {
  const name = Object.keys(query).find((k) => typeof query[k] !== 'string')
  return name === undefined ? null : apiError('feature_not_supported', `The query parameter ${name} may be given once.`, { param: name })
}

/** The page size of a usage listing (repeated parameters refused first); an ApiError naming the field when invalid. */
export function pageLimit(query: Record<string, unknown>, max: number, fallback: number): number | ApiError {
  const repeated = repeatedParam(query)
  if (repeated) return repeated
  const limit = query.limit === undefined ? fallback : countFrom(query.limit, max)
  return limit ?? apiError('feature_not_supported', `limit must be an integer from 1 to ${max}.`, { param: 'limit' })
}

/** The `key_id` and `model` filters of a usage query. */
export function usageFilterOf(q: Record<string, string | undefined>): UsageFilter {
  return { ...(q.key_id ? { keyId: q.key_id } : {}), ...(q.model ? { model: q.model } : {}) }
}

/** One page of an account's usage records, newest first, filtered by `model` and `key_id`, after `after`; or the refusal of the query. */
export async function usagePage(store: Store, accountId: number, q: Record<string, string | undefined>, max: number, fallback: number) {
  const limit = pageLimit(q, max, fallback)
  if (isApiError(limit)) return limit
  // A cursor that names no record of this account would start over from the newest: a client paging on would loop.
  if (q.after && !(await store.usage.get(accountId, q.after))) {
    return apiError('feature_not_supported', `after names no usage record of this account (${clipped(q.after)}); send the last_id of the previous page.`, { param: 'after' })
  }
  const rows = await store.usage.list(accountId, { limit: limit + 1, ...usageFilterOf(q), ...(q.after ? { after: q.after } : {}) })
  const page = rows.slice(0, limit)
  return { object: 'list' as const, data: page.map(wireUsage), has_more: rows.length > limit, last_id: page.at(-1)?.requestId ?? null }
}

/** GET /v1/usage (newest first, paginated) and GET /v1/usage/{request_id}, for the key's owner. */
export function usageRoutes(app: FastifyInstance, gw: Gateway, onRequest: ReturnType<typeof keyCheck>): void {
  app.get<{ Querystring: Record<string, string | undefined> }>('/v1/usage', { onRequest }, async (req, reply) => {
    const page = await usagePage(gw.store, callerOf(req).accountId, req.query, MAX_LIMIT, DEFAULT_LIMIT)
    return isApiError(page) ? sendError(reply, page) : page
  })

  app.get<{ Params: { id: string } }>('/v1/usage/:id', { onRequest }, async (req, reply) => {
    const caller = callerOf(req)
    const u = await gw.store.usage.get(caller.accountId, req.params.id)
    if (!u) return sendError(reply, apiError('feature_not_supported', `No usage record ${clipped(req.params.id)} for this account.`, { param: 'request_id', status: 404 }))
    return wireUsage(u)
  })
}
