import { apiError, clipped, isApiError, type ApiError } from '../protocol/errors.js'
import { countFrom } from '../protocol/counts.js'
import type { UsageFilter, UsageRepo } from '../store/usage.js'
import type { RefusalRepo } from '../store/refusals.js'

/** The most rows of refusal counts one answer lists. */
const REFUSAL_ROWS = 1_000
import { wireUsage } from './wire.js'

/**
 * Refuses a query parameter sent more than once (the parser makes it an array), naming it; null when each is a string.
 */
export function repeatedParam(query: Record<string, unknown>): ApiError | null {
  const name = Object.keys(query).find((k) => typeof query[k] !== 'string')
  return name === undefined
    ? null
    : apiError('feature_not_supported', `The query parameter ${name} may be given once.`, { param: name })
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

/** The query of a usage page: its parameters, and the largest and default page sizes. */
export interface PageQuery {
  query: Record<string, string | undefined>
  max: number
  fallback: number
}

/** What the API and the portal read of an account's usage records. */
export class UsageQueries {
  constructor(
    private readonly usage: UsageRepo,
    private readonly refusals: RefusalRepo,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Requests refused before admission (no capacity, insufficient quota), counted per key, model, code and minute over
   * the last `hours` (at most 24 by default), newest first: they are not recorded one by one.
   */
  async refused(accountId: number, query: Record<string, unknown>) {
    const now = this.now()
    const repeated = repeatedParam(query)
    if (repeated) return repeated
    const hours = query.hours === undefined ? 24 : countFrom(query.hours, 24 * 7)
    if (hours === null)
      return apiError('feature_not_supported', 'hours must be an integer from 1 to 168.', { param: 'hours' })
    const rows = await this.refusals.list(accountId, now - hours * 3_600_000, REFUSAL_ROWS)
    const data = rows.map((r) => ({
      object: 'usage.refusals',
      minute: Math.floor(r.minute / 1000),
      key_id: r.keyId,
      model: r.model,
      code: r.code,
      count: r.count,
    }))
    return { object: 'list' as const, data }
  }

  /** One page of an account's records, newest first, filtered and after the cursor; or the query's refusal. */
  async page(accountId: number, { query: q, max, fallback }: PageQuery) {
    const limit = pageLimit(q, max, fallback)
    if (isApiError(limit)) return limit
    // A cursor that names no record of this account would start over from the newest: a client paging on would loop.
    if (q.after && !(await this.usage.get(accountId, q.after))) {
      const message =
        `after names no usage record of this account (${clipped(q.after)}); ` + 'send the last_id of the previous page.'
      return apiError('feature_not_supported', message, { param: 'after' })
    }
    const filter = { limit: limit + 1, ...usageFilterOf(q), ...(q.after ? { after: q.after } : {}) }
    const rows = await this.usage.list(accountId, filter)
    const page = rows.slice(0, limit)
    return {
      object: 'list' as const,
      data: page.map(wireUsage),
      has_more: rows.length > limit,
      last_id: page.at(-1)?.requestId ?? null,
    }
  }

  /** One record of an account, on the wire; undefined when the account has none of that id. */
  async record(accountId: number, requestId: string) {
    const u = await this.usage.get(accountId, requestId)
    return u && wireUsage(u)
  }
}
