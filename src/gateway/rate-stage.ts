import type { ApiError } from '../protocol/errors.js'
import type { Caller } from '../auth/caller.js'
import type { RateGate, RateTaken } from '../limits/rate-gate.js'
import type { Finished } from './charge.js'
import type { Prepared } from './prepare.js'
import { holdable, type HoldRate } from './admission.js'
import type { RateAnswer, RateTake } from '../limits/counter.js'

/** A request counted against its key's rate limits, to be corrected to what it was billed once it ends. */
export interface CountedRate {
  gate: RateGate
  keyId: string
  taken: RateTaken
}

type Headers = ((h: Record<string, string>) => void) | undefined

/**
 * A take the request's hold counts in its own transaction (`RateGate.inHold`): once the hold has answered, `counted`
 * is the request's count when the key's limits left room.
 */
export class RateInHold implements HoldRate {
  counted?: CountedRate

  constructor(
    private readonly gate: RateGate,
    private readonly keyId: string,
    readonly take: RateTake,
    private readonly headers: Headers,
  ) {}

  readonly answered = (a: RateAnswer): ApiError | undefined => {
    const check = this.gate.checked(this.take, a)
    this.headers?.(check.headers)
    if (check.taken) this.counted = { gate: this.gate, keyId: this.keyId, taken: check.taken }
    return check.error
  }
}

/**
 * Counts a request of a limited key at its maximum tokens (prompt and output bound), passing the key's rate headers to
 * `headers`; its count, its refusal, or undefined (no limits, or unchecked). Where the gate counts in holds, the take
 * is left to the hold (of a request that will have one).
 */
export async function takeRate(
  gate: RateGate | undefined,
  caller: Caller,
  prepared: Prepared,
  headers: Headers,
): Promise<CountedRate | RateInHold | ApiError | undefined> {
  if (!gate || !caller.limits) return undefined
  const tokens = prepared.inputTokens + prepared.maxTokens
  // A request refused before any hold (`holdable`) is counted on its own.
  if (gate.inHold && holdable(prepared))
    return new RateInHold(gate, caller.keyId, gate.toTake(caller.limits, tokens), headers)
  const check = await gate.take(caller.keyId, caller.limits, tokens)
  headers?.(check.headers)
  if (check.error) return check.error
  return check.taken && { gate, keyId: caller.keyId, taken: check.taken }
}

/**
 * Corrects a counted request to the tokens it was billed (none unless it was charged); resolves once every gateway
 * counts it so, before its reply goes out.
 */
export async function correctRate(
  rate: CountedRate | undefined,
  prepared: Prepared,
  finished: Finished | undefined,
): Promise<void> {
  if (!rate) return
  const billed =
    finished?.kind === 'delivered' && finished.cost > 0n
      ? finished.usage.total_tokens
      : finished?.kind === 'closed' && finished.paid
        ? prepared.inputTokens + finished.paid.completionTokens
        : 0
  await rate.gate.correct(rate.keyId, rate.taken, billed)
}
