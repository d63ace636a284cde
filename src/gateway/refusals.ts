import { apiError, type ApiError } from '../protocol/errors.js'
import { REQUEST_REFUSED } from '../routing/attempt.js'
import type { Health } from '../routing/health.js'
import type { Reachability } from '../routing/reachability.js'
import type { RouteOutcome } from '../routing/route-run.js'
import type { Prepared } from './prepare.js'

/** What a refusal of a request no offer served reads: the breakers and whether the providers can be reached. */
export interface RefusalSources {
  health: Health
  reachability: Reachability
}

/** The refusal of a request every offer of its plan failed (or none could take): nothing was charged. */
export function failedError(
  { health, reachability }: RefusalSources,
  p: Pick<Prepared, 'model' | 'plan'>,
  outcome: Extract<RouteOutcome, { kind: 'failed' }>,
): ApiError {
  const tried = outcome.attempts.length
  // Every offer that could serve the request was tried and refused the request itself: no retry would fare better,
  // nor another model. (One left out as busy or broken might yet take it.)
  if (
    tried === p.plan.allKeys.length &&
    outcome.attempts.every((a) => a.failure.status !== undefined && REQUEST_REFUSED.has(a.failure.status))
  ) {
    return apiError(
      'feature_not_supported',
      `Every provider of ${p.model} tried (${tried}) refused the request as invalid ` +
        `(${outcome.attempts[0]!.failure.detail}). Nothing was charged.`,
      { param: null },
    )
  }
  // Both codes tell the client when the earliest breaker half-opens (this failure may have opened them).
  const retryAfter = health.retryAfterSeconds(p.plan.allKeys)
  if (outcome.code === 'provider_output_invalid') {
    const detail = outcome.attempts.find((a) => a.failure.kind === 'invalid_output')?.failure.detail ?? 'invalid output'
    return apiError(
      'provider_output_invalid',
      `Every provider of ${p.model} tried (${tried}) answered with output the marketplace refused to deliver ` +
        `(${detail}). Nothing was charged; retry after ${retryAfter} s.`,
      { retryAfter },
    )
  }
  const advice = p.plan.cortex
    ? `retry after ${retryAfter} s`
    : `A named model is never substituted; retry after ${retryAfter} s or use svc/cortex@1`
  const down = reachability.allDown(p.plan.allKeys.map((k) => k.slice(0, k.indexOf('|'))))
  if (down !== undefined) {
    const message = `No provider of ${p.model} can be reached (${down}): they are unreachable, not busy. ${advice}.`
    return apiError('no_capacity', message, { retryAfter })
  }
  return apiError('no_capacity', `No provider of ${p.model} can take the request now (${tried} tried). ${advice}.`, {
    retryAfter,
  })
}

/** no_capacity for a plan with no usable offer at all, decided before any money moves. */
export function noCapacityBeforeWork(sources: RefusalSources, p: Pick<Prepared, 'model' | 'plan'>): ApiError {
  return failedError(sources, p, { kind: 'failed', code: 'no_capacity', attempts: [] })
}

/** What the client is told when the gateway failed it: nothing was charged, and where to check before a retry. */
export function internalError(requestId: string): ApiError {
  const message =
    `The gateway could not complete the request because of an internal error (${requestId}); ` +
    `check GET /v1/usage/${requestId} before retrying.`
  return apiError('no_capacity', message, { retryAfter: 1 })
}
