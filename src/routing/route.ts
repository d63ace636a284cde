import type { ModelConfig } from '../config-schema.js'
import { maxBig, type Prices } from '../money/usdc.js'
import type { CallPolicy, ToolRules } from '../tools/assemble.js'
import type { Catalog, Offer } from './catalog.js'
import type { Health } from './health.js'
import { rankOffers } from './plan.js'
import { allowedOffers, preferredOrder, type Preferences } from './preferences.js'
import { tryOffers, type Attempt, type AttemptContext, type BoundRequest, type Produced } from './failover.js'

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
}: {
  catalog: Catalog
  health: Health
  inputTokens: number
  model: ModelConfig
  request: BoundRequest
  prefs?: Preferences
}): RoutePlan {
  const all = allowedOffers(catalog.offers.get(model.id) ?? [], prefs).offers
  const offers = preferredOrder(
    rankOffers(all, health, { inputTokens, maxOutputTokens: request.maxTokens }),
    prefs,
    health,
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
}: {
  catalog: Catalog
  health: Health
  inputTokens: number
  fitting: readonly Candidate[]
  vendor: BoundRequest | undefined
  prefs?: Preferences
}): RoutePlan {
  const allowed = (id: string) => allowedOffers(catalog.offers.get(id) ?? [], prefs).offers
  const targets = fitting.map(({ model, request }) => {
    const ranked = rankOffers(allowed(model.id), health, { inputTokens, maxOutputTokens: request.maxTokens })
    return { model, offers: preferredOrder(ranked, prefs, health), request }
  })
  const offers = targets.flatMap((t) => t.offers)
  const vendorAllowed = catalog.managed && allowedOffers([catalog.managed], prefs).offers.length > 0
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

export type RouteOutcome =
  | { kind: 'delivered'; reply: Produced; servedModel: string; failedTargets: number; managedWhy?: ManagedWhy }
  | { kind: 'failed'; code: 'no_capacity' | 'provider_output_invalid'; attempts: Attempt[] }
  | {
      kind: 'broken'
      code: 'stream_interrupted' | 'provider_output_invalid'
      detail: string
      reply: Produced
      servedModel: string
    }
  | { kind: 'client_closed'; reply?: Produced; servedModel?: string }

/** Runs the plan: each target's offers in turn, then the vendor; docs/architecture.md §5. */
export async function executeRoute(plan: RoutePlan, calls: CallPolicy, ctx: AttemptContext): Promise<RouteOutcome> {
  const attempts: Attempt[] = []
  let failedTargets = 0
  for (const target of plan.targets) {
    const rules: ToolRules = { ...calls, maxArgumentBytes: target.model.tool_contract?.max_argument_bytes ?? 0 }
    const out = await tryOffers(target.offers, target.request, rules, ctx)
    if (out.kind === 'failed') {
      attempts.push(...out.attempts)
      failedTargets++
      continue
    }
    return withModel(out, target.model.id, failedTargets)
  }
  const invalidSeen = attempts.some((a) => a.failure.kind === 'invalid_output')
  if (plan.managed && !ctx.cancel.aborted) {
    const managedWhy: ManagedWhy =
      plan.targets.length === 0 ? 'no_candidate' : invalidSeen ? 'provider_output_invalid' : 'no_capacity'
    const { offer, request } = plan.managed
    const out = await tryOffers([offer], request, { ...calls, maxArgumentBytes: 0 }, ctx)
    if (out.kind !== 'failed') return withModel(out, offer.modelId, failedTargets, managedWhy)
    attempts.push(...out.attempts)
    return { kind: 'failed', code: 'no_capacity', attempts }
  }
  if (ctx.cancel.aborted) return { kind: 'client_closed' }
  return { kind: 'failed', code: invalidSeen && !plan.cortex ? 'provider_output_invalid' : 'no_capacity', attempts }
}

function withModel(
  out: Exclude<Awaited<ReturnType<typeof tryOffers>>, { kind: 'failed' }>,
  servedModel: string,
  failedTargets: number,
  managedWhy?: ManagedWhy,
): RouteOutcome {
  switch (out.kind) {
    case 'delivered':
      return { kind: 'delivered', reply: out.reply, servedModel, failedTargets, ...(managedWhy ? { managedWhy } : {}) }
    case 'broken':
      return { ...out, servedModel }
    case 'client_closed':
      return { ...out, servedModel }
  }
}
