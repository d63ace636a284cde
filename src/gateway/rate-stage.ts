import type { ApiError } from '../protocol/errors.js'
import type { Caller } from '../auth/caller.js'
import type { RateGate, RateTaken } from '../limits/rate-gate.js'
import type { Finished } from './charge.js'
import type { Prepared } from './prepare.js'

/** A request counted against its key's rate limits, to be settled to what it was billed once it ends. */
export interface CountedRate {
  gate: RateGate
  keyId: string
  taken: RateTaken
}

/**
 * Counts a request of a limited key at its maximum tokens (prompt and output bound), passing the key's rate headers to
 * `headers`; its count, its refusal, or undefined (no limits, or unchecked).
 */
export async function takeRate(
  gate: RateGate | undefined,
  caller: Caller,
  prepared: Prepared,
  headers: ((h: Record<string, string>) => void) | undefined,
): Promise<CountedRate | ApiError | undefined> {
  if (!gate || !caller.limits) return undefined
  const check = await gate.take(caller.keyId, caller.limits, prepared.inputTokens + prepared.maxTokens)
  headers?.(check.headers)
  if (check.error) return check.error
  return check.taken && { gate, keyId: caller.keyId, taken: check.taken }
}

/** Settles a counted request to the tokens it was billed: none unless it was charged. */
export function settleRate(rate: CountedRate | undefined, prepared: Prepared, finished: Finished | undefined): void {
  if (!rate) return
  const billed =
    finished?.kind === 'delivered' && finished.cost > 0n
      ? finished.usage.total_tokens
      : finished?.kind === 'closed' && finished.paid
        ? prepared.inputTokens + finished.paid.completionTokens
        : 0
  rate.gate.settle(rate.keyId, rate.taken, billed)
}
