import type { ModelConfig } from '../config-schema.js'
import { maxBig, type Prices } from '../money/usdc.js'
import type { Catalog, Offer } from './catalog.js'
import type { Health } from './health.js'
import { rankOffers, tierOf, type Verified } from './plan.js'
import { allowedOffers, preferredOrder, type Preferences } from './preferences.js'
import type { BoundRequest } from './attempt.js'

/**
 * A model that fits the request, and what its offers are sent: its own reply bound (svc/cortex@1's may differ,
 * docs/architecture.md §4).
 */
export interface Candidate {
  model: ModelConfig
  request: BoundRequest
}

export interface Target extends Candidate {
  /** Usable offers, best first, as ranked when the request was admitted. */
  offers: Offer[]
}

export type ManagedWhy = 'no_capacity' | 'provider_output_invalid' | 'no_candidate'

/** Everything that may serve one request, fixed before admission so the hold covers the highest price in it. */
export interface RoutePlan {
  cortex: boolean
  targets: Target[]
  /** The vendor of last resort (svc/cortex@1 only), and what it is sent. */
  managed?: { offer: Offer; request: BoundRequest }
  /** Highest input and output prices of all offers in the plan. */
  ceiling: Prices
  /**
   * Health keys of every offer that could serve the request, usable now or not (for Retry-After): a named model's, or
   * the fitting cortex candidates' and the vendor's.
   */
  allKeys: string[]
}

/** Plans a named model: its own offers only. A named model is never substituted. */
export function planNamed({
  catalog,
  health,
  inputTokens,
  model,
  request,
  prefs,
  verified,
}: {
  catalog: Catalog
  health: Health
  inputTokens: number
  model: ModelConfig
  request: BoundRequest
  prefs?: Preferences
  verified: Verified
}): RoutePlan {
  const all = allowedOffers(catalog.offers.get(model.id) ?? [], prefs, verified.stateOf).offers
  const offers = preferredOrder(
    rankOffers(all, health, { inputTokens, maxOutputTokens: request.maxTokens }, verified),
    prefs,
    health,
    (o) => tierOf(o, verified),
  )
  return {
    cortex: false,
    targets: [{ model, offers, request }],
    ceiling: ceilingOf(offers),
    allKeys: all.map((o) => o.key),
  }
}

/**
 * Plans svc/cortex@1: the fitting candidates in preference order, then the managed vendor, sent `vendor` (none when the
 * vendor cannot take the request).
 */
export function planCortex({
  catalog,
  health,
  inputTokens,
  fitting,
  vendor,
  prefs,
  verified,
}: {
  catalog: Catalog
  health: Health
  inputTokens: number
  fitting: readonly Candidate[]
  vendor: BoundRequest | undefined
  prefs?: Preferences
  /** svc/cortex@1 prefers verified offers within each candidate. */
  verified: Verified
}): RoutePlan {
  const allowed = (id: string) => allowedOffers(catalog.offers.get(id) ?? [], prefs, verified.stateOf).offers
  const targets = fitting.map(({ model, request }) => {
    const est = { inputTokens, maxOutputTokens: request.maxTokens }
    const ranked = rankOffers(allowed(model.id), health, est, verified)
    return { model, offers: preferredOrder(ranked, prefs, health, (o) => tierOf(o, verified)), request }
  })
  const offers = targets.flatMap((t) => t.offers)
  const vendorAllowed = catalog.managed && allowedOffers([catalog.managed], prefs, verified.stateOf).offers.length > 0
  const managed = vendor && vendorAllowed ? { offer: catalog.managed!, request: vendor } : undefined
  if (managed) offers.push(managed.offer)
  // Candidates that do not fit this request cannot serve it whatever their breakers say.
  const allKeys = fitting.flatMap(({ model }) => allowed(model.id).map((o) => o.key))
  if (managed) allKeys.push(managed.offer.key)
  return { cortex: true, targets, ...(managed ? { managed } : {}), ceiling: ceilingOf(offers), allKeys }
}

/** The highest input and output prices among offers (the cortex's admission bound and its listed pricing). */
export function ceilingOf(offers: readonly Offer[]): Prices {
  let input = 0n
  let output = 0n
  for (const o of offers) {
    input = maxBig(input, o.prices.input)
    output = maxBig(output, o.prices.output)
  }
  return { input, output }
}

export function planOfferCount(plan: RoutePlan): number {
  return plan.targets.reduce((n, t) => n + t.offers.length, 0) + (plan.managed ? 1 : 0)
}
