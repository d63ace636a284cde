import type { KeyRepo } from '../store/keys.js'
import type { RateGate } from './rate-gate.js'

/**
 * GET /v1/usage/keys: the account's live keys with their limits, and for each limited key what it used this minute
 * and when that resets (null when the counter does not answer).
 */
export async function keyLimitsOf(keys: KeyRepo, gate: RateGate, accountId: number) {
  const live = (await keys.list(accountId)).filter((k) => k.revokedAt === null)
  const data = await Promise.all(
    live.map(async (k) => {
      const limited = k.limits.rpm !== null || k.limits.tpm !== null
      const now = limited ? await gate.current(k.id) : null
      return {
        object: 'key_limits',
        key_id: k.id,
        name: k.name,
        prefix: k.prefix,
        rpm: k.limits.rpm,
        tpm: k.limits.tpm,
        this_minute: now && { requests: now.count.requests, tokens: now.count.tokens, resets_at: now.resets },
      }
    }),
  )
  return { object: 'list', data }
}
