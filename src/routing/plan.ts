import { priceOf } from '../money/usdc.js'
import type { Offer } from './catalog.js'
import type { Health } from './health.js'
import type { StateOf } from './verification.js'

export interface Estimate {
  inputTokens: number
  maxOutputTokens: number
}

/** What the audits found of offers, as routing weighs it. */
export interface Verified {
  stateOf: StateOf
  /** Verified offers before unverified ones (svc/cortex@1); suspect ones come last either way. */
  prefer: boolean
  /** An audit's request: routed whatever the audits found (`stateOf` is not asked). */
  audit: boolean
}

/**
 * Orders a model's offers for one request (docs/architecture.md §5): suspect offers last (and, when `verified.prefer`,
 * verified before unverified), then by what the request could cost at each offer's price, then health (closed before
 * half-open), then latency. Quarantined offers, open breakers and full offers are left out.
 */
export function rankOffers(offers: readonly Offer[], health: Health, est: Estimate, verified?: Verified): Offer[] {
  const usable: { o: Offer; tier: number; cost: bigint; probe: number; latency: number }[] = []
  for (const o of offers) {
    const breaker = health.breaker(o.key)
    if (breaker === 'open' || health.inflight(o.key) >= o.maxConcurrency) continue
    const tier = tierOf(o, verified)
    if (tier === QUARANTINED) continue
    usable.push({
      o,
      tier,
      cost: priceOf(o.prices, est.inputTokens, est.maxOutputTokens),
      probe: breaker === 'half-open' ? 1 : 0,
      latency: health.latency(o.key),
    })
  }
  usable.sort(
    (a, b) =>
      a.tier - b.tier || (a.cost !== b.cost ? (a.cost < b.cost ? -1 : 1) : a.probe - b.probe || a.latency - b.latency),
  )
  return usable.map((u) => u.o)
}

const QUARANTINED = 3

/** An offer's place by what its audits found: 0 verified (when preferred), 1 others, 2 suspect, 3 quarantined. */
export function tierOf(o: Offer, verified: Verified | undefined): number {
  if (!verified || verified.audit) return 1
  const state = verified.stateOf(o.key)
  if (state === 'quarantined') return QUARANTINED
  if (state === 'suspect') return 2
  return verified.prefer && state === 'verified' ? 0 : 1
}

/** The lowest live offer of a model (by input + output price), for the model list. */
export function lowestLive(offers: readonly Offer[], health: Health): Offer | undefined {
  let best: Offer | undefined
  for (const o of offers) {
    if (health.breaker(o.key) === 'open') continue
    if (!best || o.prices.input + o.prices.output < best.prices.input + best.prices.output) best = o
  }
  return best
}
