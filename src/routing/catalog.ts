import type { Config, ModelConfig } from '../config-schema.js'
import type { TokenCounter } from '../metering/counter.js'
import { tokenizerOf } from '../metering/tokenizers.js'
import { O200K } from '../metering/tokens.js'
import { CORTEX_MODEL_ID, type Capabilities, type ToolContract } from '../protocol/models.js'
import type { Prices } from '../money/usdc.js'
import type { Provider } from '../providers/types.js'
import { checksumAddress } from '../protocol/address.js'
import type { LiveOffer } from '../store/providers.js'
import type { AddressPolicy } from '../providers/address-policy.js'
import type { StateOf, VerificationState } from './verification.js'

/**
 * Builds the client of an upstream; `addresses`, for an endpoint a wallet registered, the addresses it may be reached
 * at (the config's providers and vendor, written by the operator, are reached wherever they are).
 */
export type MakeUpstream = (baseUrl: string, apiKey: string | undefined, addresses?: AddressPolicy) => Provider

/** One provider's offer of one model: where to send requests, at what price, how many at once. */
export interface Offer {
  /** Health key: `<provider address>|<model id>`. */
  key: string
  modelId: string
  /** The serving address, or `managed` for the vendor of last resort. */
  provider: string
  upstream: Provider
  upstreamModel: string
  prices: Prices
  maxConcurrency: number
  /** `<bundle>:<profile>` of the provider. */
  fingerprint: string
  managed: boolean
  /** The account paid for it, for an offer kept in the store (a config offer's is found by its address). */
  payeeId?: number
  /** The tokenizer its model is metered in. */
  counter: TokenCounter
  /**
   * Whether that tokenizer is its model's own (the model names it), so that a provider's count of a reply can be
   * compared with the gateway's; o200k standing in for an unnamed one is not.
   */
  ownTokenizer: boolean
  /** What identifies what it serves (endpoint, upstream model, bundle and profile): an audit follows each change. */
  signature: string
}

/** An offer's verification: its state, its conclusive audits of the last day, its last audit and since when. */
export interface OfferVerification {
  state: VerificationState
  passed: number
  failed: number
  lastAuditAt: number | null
  since: number | null
}

/** How long a store endpoint's client stays open once no live offer uses it: longer than any request it serves. */
const RETIRE_MS = 15 * 60_000

const upstreamKey = (baseUrl: string, apiKey: string | null) => `${baseUrl}\0${apiKey ?? ''}`

/** The routing model as listed: candidates and their most conservative capabilities. */
export interface CortexModel {
  candidates: string[]
  contextLimit: number
  capabilities: Capabilities
  tool_contract?: ToolContract
}

/** Models and offers from the config, with one upstream client per provider. */
export class Catalog {
  readonly models = new Map<string, ModelConfig>()
  /** Each model's tokenizer (its own, or o200k). */
  readonly counters = new Map<string, TokenCounter>()
  readonly offers = new Map<string, Offer[]>()
  readonly managed: Offer | undefined
  /** The managed vendor's context window (`managed.contextLimit`); Infinity when the config does not give it. */
  readonly managedContext: number = Infinity
  readonly cortex: CortexModel | undefined
  private readonly upstreams: Provider[] = []
  /** The config's offers by model: the seed that the store's live offers are added to. */
  private readonly seed = new Map<string, Offer[]>()
  /**
   * Clients of the store's endpoints, by base URL and key. One no live offer uses any more is closed once it has been
   * unused for RETIRE_MS (requests routed before may still be served by it), so their number is bounded by the
   * endpoints live in that time, however many come and go.
   */
  private readonly liveUpstreams = new Map<string, { upstream: Provider; unusedSince?: number }>()
  private liveSignature = ''

  /** Where the store's endpoints (registered by wallets) may be reached. */
  readonly addresses: AddressPolicy
  /** Health keys of the offers the operator made references (`audit.references`): verified by definition. */
  readonly references: ReadonlySet<string>
  /** Offers' verification states as the store last said (by health key), with their audits of the last day. */
  private states = new Map<string, OfferVerification>()

  constructor(
    config: Config,
    private readonly makeUpstream: MakeUpstream,
  ) {
    this.addresses = addressPolicyOf(config)
    this.references = new Set(
      Object.entries(config.audit?.references ?? {}).map(([model, a]) => `${checksumAddress(a)}|${model}`),
    )
    for (const m of config.models) {
      this.models.set(m.id, m)
      this.counters.set(m.id, tokenizerOf(m.tokenizer))
      this.offers.set(m.id, [])
    }
    for (const p of config.providers) {
      const upstream = makeUpstream(p.baseUrl, p.apiKey)
      this.upstreams.push(upstream)
      const address = checksumAddress(p.address)
      for (const o of p.offers) {
        this.offers.get(o.model)!.push({
          key: `${address}|${o.model}`,
          modelId: o.model,
          provider: address,
          upstream,
          upstreamModel: o.upstreamModel,
          prices: { input: BigInt(o.input_price_per_mtok), output: BigInt(o.output_price_per_mtok) },
          maxConcurrency: o.maxConcurrency,
          fingerprint: `${p.bundle}:${p.profile}`,
          managed: false,
          counter: this.counters.get(o.model)!,
          ownTokenizer: this.models.get(o.model)!.tokenizer !== undefined,
          signature: `${p.baseUrl}|${o.upstreamModel}|${p.bundle}:${p.profile}`,
        })
      }
    }
    for (const [id, offers] of this.offers) this.seed.set(id, [...offers])
    if (config.managed) {
      const m = config.managed
      const upstream = makeUpstream(m.baseUrl, m.apiKey)
      this.upstreams.push(upstream)
      this.managed = {
        key: `managed|${m.upstreamModel}`,
        modelId: m.upstreamModel,
        provider: 'managed',
        upstream,
        upstreamModel: m.upstreamModel,
        prices: { input: BigInt(m.input_price_per_mtok), output: BigInt(m.output_price_per_mtok) },
        maxConcurrency: m.maxConcurrency ?? 1024,
        fingerprint: `managed:${m.upstreamModel}`,
        managed: true,
        counter: O200K,
        ownTokenizer: false,
        signature: `${m.baseUrl}|${m.upstreamModel}`,
      }
      this.managedContext = m.contextLimit ?? Infinity
    }
    const candidates = config.cortex?.candidates ?? []
    if (candidates.length)
      this.cortex = conservative(
        candidates,
        candidates.map((c) => this.models.get(c)!),
      )
  }

  /**
   * An offer's verification state: the managed vendor's and a reference's are `verified` (the operator's own); others
   * as their audits left them, `unverified` before any.
   */
  readonly stateOf: StateOf = (key) => {
    if (key.startsWith('managed|') || this.references.has(key)) return 'verified'
    return this.states.get(key)?.state ?? 'unverified'
  }

  /** What the audits found of an offer (its state, audits of the last day), as GET /v1/models/{id}/endpoints shows. */
  verificationOf(key: string): OfferVerification {
    const state = this.stateOf(key)
    const found = this.states.get(key)
    return found && found.state === state ? found : { state, passed: 0, failed: 0, lastAuditAt: null, since: null }
  }

  /** The store's verification states of offers (`offer_states`). */
  applyStates(
    rows: readonly (Omit<OfferVerification, 'state'> & { provider: string; model: string; state: string })[],
  ): void {
    this.states = new Map(
      rows.map((r) => [
        `${r.provider}|${r.model}`,
        {
          state: r.state as VerificationState,
          passed: r.passed,
          failed: r.failed,
          lastAuditAt: r.lastAuditAt,
          since: r.since,
        },
      ]),
    )
  }

  /**
   * Routes to the store's live offers beside the config's (a store offer of the same provider and model takes the
   * config's place); offers of models this gateway does not list are left out. True when they changed. Requests already
   * routed keep the offers they were planned with.
   */
  applyLive(live: readonly LiveOffer[], now = Date.now()): boolean {
    this.retireUnused(new Set(live.map((l) => upstreamKey(l.baseUrl, l.apiKey))), now)
    const signature = JSON.stringify(live, (_k, v) => (typeof v === 'bigint' ? v.toString() : v))
    if (signature === this.liveSignature) return false
    this.liveSignature = signature
    const next = new Map([...this.seed].map(([id, offers]) => [id, [...offers]]))
    for (const l of live) {
      const offers = next.get(l.model)
      if (!offers) continue
      const address = checksumAddress(l.address)
      const key = `${address}|${l.model}`
      const at = offers.findIndex((o) => o.key === key)
      const offer: Offer = {
        key,
        modelId: l.model,
        provider: address,
        upstream: this.liveUpstream(l.baseUrl, l.apiKey),
        upstreamModel: l.upstreamModel,
        prices: { input: l.inputPrice, output: l.outputPrice },
        maxConcurrency: l.maxConcurrency,
        fingerprint: `${l.bundle}:${l.profile}`,
        managed: false,
        payeeId: l.accountId,
        counter: this.counters.get(l.model)!,
        ownTokenizer: this.models.get(l.model)!.tokenizer !== undefined,
        signature: `${l.baseUrl}|${l.upstreamModel}|${l.bundle}:${l.profile}`,
      }
      if (at >= 0) offers[at] = offer
      else offers.push(offer)
    }
    for (const [id, offers] of next) this.offers.set(id, offers)
    return true
  }

  private liveUpstream(baseUrl: string, apiKey: string | null): Provider {
    const key = upstreamKey(baseUrl, apiKey)
    let entry = this.liveUpstreams.get(key)
    if (!entry)
      this.liveUpstreams.set(
        key,
        (entry = { upstream: this.makeUpstream(baseUrl, apiKey ?? undefined, this.addresses) }),
      )
    delete entry.unusedSince
    return entry.upstream
  }

  /** Closes the store endpoints' clients that no live offer has used for RETIRE_MS. */
  private retireUnused(used: ReadonlySet<string>, now: number): void {
    for (const [key, entry] of this.liveUpstreams) {
      if (used.has(key)) continue
      entry.unusedSince ??= now
      if (now - entry.unusedSince < RETIRE_MS) continue
      this.liveUpstreams.delete(key)
      void entry.upstream.close().catch(() => {})
    }
  }

  isCortex(id: string): boolean {
    return id === CORTEX_MODEL_ID && this.cortex !== undefined
  }

  async close(): Promise<void> {
    await Promise.all(
      [...this.upstreams, ...[...this.liveUpstreams.values()].map((e) => e.upstream)].map((u) => u.close()),
    )
  }
}

/** The most conservative capabilities, context and tool contract among the candidates (docs/interface.md §2.1). */
export function conservative(candidates: string[], models: ModelConfig[]): CortexModel {
  const caps = models.map((m) => m.capabilities)
  const capabilities: Capabilities = {
    workload: 'chat',
    tools: caps.every((c) => c.tools),
    structuredOutputs: caps.every((c) => c.structuredOutputs),
    reasoning: caps.every((c) => c.reasoning),
    streaming: caps.every((c) => c.streaming),
    maxOutputTokens: Math.min(...caps.map((c) => c.maxOutputTokens)),
  }
  const out: CortexModel = { candidates, contextLimit: Math.min(...models.map((m) => m.contextLimit)), capabilities }
  if (capabilities.tools) out.tool_contract = intersectContracts(models.map((m) => m.tool_contract!))
  return out
}

function intersectContracts(contracts: ToolContract[]): ToolContract {
  const first = contracts[0]!
  return {
    tool_choice: first.tool_choice.filter((c) => contracts.every((k) => k.tool_choice.includes(c))),
    parallel_tool_calls: contracts.every((k) => k.parallel_tool_calls),
    strict_schemas: contracts.every((k) => k.strict_schemas),
    tool_streaming: contracts.every((k) => k.tool_streaming === 'incremental') ? 'incremental' : 'whole-call',
    // 0 means untested: any untested candidate makes the intersection untested.
    max_argument_bytes: contracts.some((k) => k.max_argument_bytes === 0)
      ? 0
      : Math.min(...contracts.map((k) => k.max_argument_bytes)),
    certified_concurrency: Math.min(...contracts.map((k) => k.certified_concurrency)),
    agentic_certified: contracts.every((k) => k.agentic_certified),
    metering_version: Math.max(...contracts.map((k) => k.metering_version)),
    certification_id: `cortex-${contracts.map((k) => k.certification_id).join('+')}`,
  }
}

/** The addresses the endpoints wallets register may be reached at: public ones and the classes the config allows. */
export function addressPolicyOf(config: Pick<Config, 'providerEndpoints'>): AddressPolicy {
  return { allow: config.providerEndpoints?.allowAddresses ?? [] }
}
