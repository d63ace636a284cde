import { apiError, type ApiError } from '../../protocol/errors.js'
import { keyLimitsProblem } from '../../accounts/operations.js'
import { parseUsdc } from '../../money/usdc.js'
import { LIMIT_RESETS, type LimitReset } from '../../limits/period.js'
import type { KeyLimits } from '../../limits/limits.js'

/** The limits a portal request may set on a key; each absent keeps the key's, null removes it. */
export interface LimitsBody {
  rpm?: unknown
  tpm?: unknown
  /** USDC as a decimal string ("2.5"), or null. */
  spend_limit?: unknown
  limit_reset?: unknown
}

const invalid = (param: string, message: string) => apiError('feature_not_supported', message, { param })

/** A request body's limits, the rest as `current`; or what is wrong, with the field named. */
export function limitsFromBody(body: LimitsBody | undefined, current: KeyLimits): KeyLimits | ApiError {
  const out: KeyLimits = { ...current }
  for (const name of ['rpm', 'tpm'] as const) {
    const v = body?.[name]
    if (v === undefined) continue
    if (v !== null && !Number.isInteger(v))
      return invalid(name, `${name} must be a whole number of a minute, or null for none.`)
    out[name] = v as number | null
  }
  const { spend_limit: limit, limit_reset: reset } = body ?? {}
  const units = typeof limit === 'string' ? parseUsdc(limit) : undefined
  if (limit !== undefined && limit !== null && (units === null || units === undefined))
    return invalid('spend_limit', 'spend_limit must be USDC as a decimal string with at most 6 decimals, or null.')
  if (reset !== undefined && !(LIMIT_RESETS as readonly unknown[]).includes(reset))
    return invalid('limit_reset', `limit_reset must be one of ${LIMIT_RESETS.join(', ')}.`)
  const spendLimit = limit === undefined ? (current.spend?.limit ?? null) : (units ?? null)
  if (spendLimit === null && reset !== undefined && reset !== 'none')
    return invalid('limit_reset', 'limit_reset needs a spend_limit.')
  out.spend =
    spendLimit === null
      ? null
      : { limit: spendLimit, reset: (reset as LimitReset | undefined) ?? current.spend?.reset ?? 'none' }
  const problem = keyLimitsProblem(out)
  return problem ? apiError('feature_not_supported', `${problem}.`, { param: null }) : out
}
