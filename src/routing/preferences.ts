import { apiError, type ApiError } from '../protocol/errors.js'
import type { ProviderPreferences } from '../protocol/chat.js'
import { parseUsdc } from '../money/usdc.js'
import type { Catalog, Offer } from './catalog.js'
import type { Health } from './health.js'
import type { StateOf } from './verification.js'

/** A request's `provider` object, read: addresses in lower case, prices in base units per million tokens. */
export interface Preferences {
  order: string[]
  only?: Set<string>
  ignore: Set<string>
  sort: 'price' | 'latency' | 'throughput'
  maxPrice: { input?: bigint; output?: bigint }
  fallbacks: boolean
  /** Only offers the audits verified (`require_verified`). */
  verifiedOnly: boolean
}

/** The request's preferences, undefined without any, or why they cannot be read (the field named). */
export function preferencesOf(p: ProviderPreferences | null | undefined): Preferences | ApiError | undefined {
  if (!p) return undefined
  const lower = (xs: string[] | undefined) => (xs ?? []).map((x) => x.toLowerCase())
  const price = (name: 'prompt' | 'completion'): bigint | ApiError | undefined => {
    const v = p.max_price?.[name]
    if (v === undefined) return undefined
    const units = parseUsdc(typeof v === 'number' ? v.toFixed(6) : v)
    if (units !== null && (typeof v === 'string' || Number.isFinite(v))) return units
    return apiError(
      'feature_not_supported',
      `Invalid value for provider.max_price.${name}: USDC per million tokens, as a number or a decimal string.`,
      { param: `provider.max_price.${name}` },
    )
  }
  const input = price('prompt')
  if (typeof input === 'object') return input
  const output = price('completion')
  if (typeof output === 'object') return output
  return {
    order: lower(p.order),
    ...(p.only ? { only: new Set(lower(p.only)) } : {}),
    ignore: new Set(lower(p.ignore)),
    sort: p.sort ?? 'price',
    maxPrice: { ...(input !== undefined ? { input } : {}), ...(output !== undefined ? { output } : {}) },
    fallbacks: p.allow_fallbacks ?? true,
    verifiedOnly: p.require_verified ?? false,
  }
}

/** What a preference left of a model's offers, and which preference left none (its field, and why). */
export interface Allowed {
  offers: Offer[]
  excludedBy?: string
}

const addressOf = (o: Offer) => o.provider.toLowerCase()

/**
 * The offers the preferences allow, whatever their health: only, ignore, max_price, order without fallbacks,
 * require_verified (by `stateOf`).
 */
export function allowedOffers(offers: readonly Offer[], prefs: Preferences | undefined, stateOf: StateOf): Allowed {
  if (!prefs) return { offers: [...offers] }
  const steps: [string, (o: Offer) => boolean][] = [
    ['provider.only names none of its providers', (o) => !prefs.only || prefs.only.has(addressOf(o))],
    ['provider.ignore leaves none of its providers', (o) => !prefs.ignore.has(addressOf(o))],
    [
      'provider.max_price is below every offer',
      (o) =>
        (prefs.maxPrice.input === undefined || o.prices.input <= prefs.maxPrice.input) &&
        (prefs.maxPrice.output === undefined || o.prices.output <= prefs.maxPrice.output),
    ],
    [
      'provider.order with allow_fallbacks false names none of its providers',
      (o) => prefs.fallbacks || prefs.order.length === 0 || prefs.order.includes(addressOf(o)),
    ],
    [
      'provider.require_verified leaves none of its providers (none has passed enough audits yet)',
      (o) => !prefs.verifiedOnly || stateOf(o.key) === 'verified',
    ],
  ]
  let left = [...offers]
  for (const [why, keep] of steps) {
    const next = left.filter(keep)
    if (next.length === 0 && left.length > 0) return { offers: [], excludedBy: why }
    left = next
  }
  return { offers: left }
}

/**
 * Orders offers ranked by price and health (`rankOffers`) as the preferences ask: by measured latency or throughput
 * (offers not yet measured last), the addresses of `order` first in its order; without fallbacks and without `order`,
 * the first alone. `tier` (what the audits found: suspect offers last) is kept whatever the preferences ask.
 */
export function preferredOrder(
  ranked: Offer[],
  prefs: Preferences | undefined,
  health: Health,
  tier?: (o: Offer) => number,
): Offer[] {
  if (!prefs) return ranked
  let out = [...ranked]
  if (prefs.sort === 'latency') out.sort(by((o) => health.latency(o.key) || Infinity))
  if (prefs.sort === 'throughput') out.sort(by((o) => -health.throughput(o.key) || Infinity))
  if (prefs.order.length > 0) {
    const place = (o: Offer) => {
      const i = prefs.order.indexOf(addressOf(o))
      return i < 0 ? prefs.order.length : i
    }
    out.sort(by(place))
  } else if (!prefs.fallbacks) out = out.slice(0, 1)
  if (tier) out.sort(by(tier))
  return out
}

/** A stable comparator by a number, smaller first. */
const by =
  (key: (o: Offer) => number) =>
  (a: Offer, b: Offer): number =>
    key(a) - key(b)

/** The refusal of a request whose preferences left no offer of its model. */
export function excludedError(model: string, why: string): ApiError {
  return apiError(
    'no_capacity',
    `No provider of ${model} is left by the request's provider preferences: ${why}. ` +
      `GET /v1/models/${model}/endpoints lists its providers; change or drop the preference.`,
    { retryAfter: 5 },
  )
}

/**
 * The refusal of a request whose preferences leave none of its models' offers (nor, for svc/cortex@1, the vendor's):
 * 503 no_capacity naming the preference; undefined when any is left, or none was there to leave.
 */
export function refusedByPreferences(
  catalog: Catalog,
  request: { model: string; ids: readonly string[]; vendor: boolean },
  prefs: Preferences | undefined,
  stateOf: StateOf,
): ApiError | undefined {
  if (!prefs) return undefined
  const sets = request.ids.map((id) => catalog.offers.get(id) ?? [])
  if (request.vendor && catalog.managed) sets.push([catalog.managed])
  let why: string | undefined
  for (const offers of sets) {
    const allowed = allowedOffers(offers, prefs, stateOf)
    if (allowed.offers.length > 0) return undefined
    why ??= allowed.excludedBy
  }
  return why === undefined ? undefined : excludedError(request.model, why)
}
