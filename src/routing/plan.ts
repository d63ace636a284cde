import { priceOf } from '../money/usdc.js'
import type { Offer } from './catalog.js'
import type { Health } from './health.js'

export interface Estimate {
  inputTokens: number
  maxOutputTokens: number
}

/**
 * Orders a model's offers for one request (docs/architecture.md §5): by what the request could cost at each offer's
 * price, then health (closed before half-open), then latency. Open breakers and full offers are left out.
 */
export function rankOffers(offers: readonly Offer[], health: Health, est: Estimate): Offer[] {
  const usable: { o: Offer; cost: bigint; probe: number; latency: number }[] = []
  for (const o of offers) {
    const breaker = health.breaker(o.key)
    if (breaker === 'open' || health.inflight(o.key) >= o.maxConcurrency) continue
    usable.push({
      o,
      cost: priceOf(o.prices, est.inputTokens, est.maxOutputTokens),
      probe: breaker === 'half-open' ? 1 : 0,
      latency: health.latency(o.key),
    })
  }
  usable.sort((a, b) => (a.cost !== b.cost ? (a.cost < b.cost ? -1 : 1) : a.probe - b.probe || a.latency - b.latency))
  return usable.map((u) => u.o)
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
