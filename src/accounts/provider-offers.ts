import type { ModelConfig } from '../config-schema.js'
import type { Store } from '../store/store.js'
import type { Endpoint, OfferFields } from '../store/providers.js'
import { formatUsdc, parseUsdc } from '../money/usdc.js'
import { probeEndpoint } from '../tools/certify.js'
import { OperationError } from './operations.js'
import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { addressRefusal, literalRefusal, type AddressPolicy } from '../providers/address-policy.js'
import { NoSecretsKey } from '../store/endpoint-keys.js'

/** Most requests at once an offer may take. */
export const MAX_OFFER_CONCURRENCY = 4096
const TEXT = /^[\x20-\x7e]{1,200}$/

/** How an offer's endpoint is checked before it goes live (`probeEndpoint`; tests inject theirs). */
export type Probe = typeof probeEndpoint

/**
 * Registers an endpoint of the account's (refused with OperationError naming what is wrong); its id. Its address must
 * be one `addresses` allows (public, unless the operator allows more): checked now on what its name resolves to, and
 * again on every connection, where a name that resolves elsewhere later is refused too.
 */
export async function addEndpoint(
  store: Store,
  e: { accountId: number; baseUrl: string; apiKey: string | null; bundle: string; profile: string; now: number },
  addresses: AddressPolicy,
): Promise<string> {
  let url: URL
  try {
    url = new URL(e.baseUrl)
  } catch {
    throw new OperationError(`base_url must be an http(s) URL of an OpenAI-compatible API (…/v1), not ${e.baseUrl}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new OperationError(`base_url must be an http(s) URL, not ${url.protocol}`)
  for (const [name, v] of [
    ['bundle', e.bundle],
    ['profile', e.profile],
  ] as const)
    if (!TEXT.test(v)) throw new OperationError(`${name} must be 1 to 200 printable characters`)
  if (e.apiKey !== null && !TEXT.test(e.apiKey))
    throw new OperationError('api_key must be 1 to 200 printable characters')
  const refused = await addressProblem(url, addresses)
  if (refused) throw new OperationError(`base_url ${url.origin} is refused: ${refused}`)
  try {
    return await store.providers.addEndpoint({ ...e, baseUrl: url.toString().replace(/\/$/, '') })
  } catch (err) {
    if (err instanceof NoSecretsKey) throw new OperationError(err.message)
    throw err
  }
}

/** Why `url`'s host may not be called under `addresses` (as it resolves now), or null. */
async function addressProblem(url: URL, addresses: AddressPolicy): Promise<string | null> {
  const literal = literalRefusal(url, addresses)
  const host = url.hostname.replace(/^\[|\]$/g, '')
  if (literal || isIP(host)) return literal
  let found: { address: string }[]
  try {
    found = await lookup(host, { all: true })
  } catch {
    return `its host ${host} does not resolve`
  }
  const refusals = found.map((a) => addressRefusal(a.address, addresses))
  return refusals.every((r) => r !== null) ? refusals[0]! : null
}

/** The most of an endpoint's probe failure told to its registrant: its own endpoint's words, cut short and plain. */
const PROBE_WORDS = 160

/** A probe's reason as the registrant reads it: printable ASCII only, at most PROBE_WORDS characters. */
export function probeReason(why: string): string {
  const plain = why.replace(/[^\x20-\x7e]/g, '?')
  return plain.length > PROBE_WORDS ? `${plain.slice(0, PROBE_WORDS)}…` : plain
}

/** An offer's fields from what a provider gave: USDC per million tokens as decimal strings. */
export function offerFields(o: {
  model: string
  upstreamModel?: string | undefined
  inputPrice: string
  outputPrice: string
  maxConcurrency?: number | undefined
}): OfferFields {
  const price = (name: string, v: string) => {
    const units = parseUsdc(v)
    if (units === null) throw new OperationError(`${name} must be USDC per million tokens, e.g. 0.15, not ${v}`)
    return units
  }
  const maxConcurrency = o.maxConcurrency ?? 64
  if (!Number.isInteger(maxConcurrency) || maxConcurrency < 1 || maxConcurrency > MAX_OFFER_CONCURRENCY)
    throw new OperationError(`max_concurrency must be a whole number from 1 to ${MAX_OFFER_CONCURRENCY}`)
  const upstreamModel = o.upstreamModel ?? o.model
  if (!TEXT.test(upstreamModel)) throw new OperationError('upstream_model must be 1 to 200 printable characters')
  return {
    model: o.model,
    upstreamModel,
    inputPrice: price('input_price', o.inputPrice),
    outputPrice: price('output_price', o.outputPrice),
    maxConcurrency,
  }
}

/**
 * Sets an offer of one of the account's live endpoints, live once its endpoint passed the probe for the model
 * (refused with OperationError: the model unknown, the endpoint gone, or the probe's reason).
 */
export async function setOffer(
  store: Store,
  at: {
    accountId: number
    endpointId: string
    models: ReadonlyMap<string, ModelConfig>
    now: number
    addresses: AddressPolicy
  },
  offer: OfferFields,
  probe: Probe = probeEndpoint,
): Promise<void> {
  const model = at.models.get(offer.model)
  if (!model)
    throw new OperationError(`no model ${offer.model} in this marketplace; GET /v1/models lists the models it serves`)
  const endpoint = await store.providers.secretOf(at.accountId, at.endpointId)
  if (!endpoint) throw new OperationError(`no live endpoint ${at.endpointId} of this wallet`)
  const why = await probe({
    baseUrl: endpoint.baseUrl,
    model: offer.upstreamModel,
    ...(endpoint.apiKey ? { apiKey: endpoint.apiKey } : {}),
    tools: model.capabilities.tools,
    addresses: at.addresses,
  })
  if (why)
    throw new OperationError(
      `the endpoint ${endpoint.baseUrl} failed its probe for ${offer.model}: ${probeReason(why)}`,
    )
  if (!(await store.providers.setOffer(at.accountId, at.endpointId, offer, at.now)))
    throw new OperationError(`no live endpoint ${at.endpointId} of this wallet`)
}

/** An endpoint and its offers as the portal's API and `svc provider --json` show them (never its API key). */
export function endpointView(e: Endpoint) {
  return {
    id: e.id,
    base_url: e.baseUrl,
    bundle: e.bundle,
    profile: e.profile,
    status: e.status,
    offers: e.offers.map((o) => ({
      model: o.model,
      upstream_model: o.upstreamModel,
      input_price_per_mtok: formatUsdc(o.inputPrice),
      output_price_per_mtok: formatUsdc(o.outputPrice),
      max_concurrency: o.maxConcurrency,
      status: o.status,
    })),
  }
}
