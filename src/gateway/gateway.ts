import { tuningOf, type Config, type Tuning } from '../config.js'
import { OpenAICompatibleProvider, type UpstreamOptions } from '../providers/openai-compatible.js'
import type { Provider } from '../providers/types.js'
import { Catalog } from '../routing/catalog.js'
import { silentLogger, type Logger } from '../ops/log.js'
import { GatewayMetrics } from '../ops/metrics.js'
import { Health } from '../routing/health.js'
import { Reachability } from '../routing/reachability.js'
import { probeProviders } from './probe.js'
import { SYSTEM_ACCOUNTS } from '../store/accounts.js'
import type { Store } from '../store/store.js'
import { KeyVerifier } from '../auth/verifier.js'
import { UsageQueries } from '../usage/query.js'
import { checksumAddress } from '../protocol/address.js'
import type { ChargeDeps } from './charge.js'
import { InstanceLifecycle, newInstanceId } from './lifecycle.js'
import { ChatPipeline } from './pipeline.js'
import { ResponsesService } from './responses/service.js'
import { ResponseMemory } from './responses/memory.js'
import { Idempotency } from './idempotency.js'
import { RefusalCounter } from './refusal-counter.js'
import { RateGate } from '../limits/rate-gate.js'
import { RedisRates } from '../limits/redis-rates.js'
import { OfferProbes } from '../routing/offer-probes.js'
import { Auditor } from '../audit/auditor.js'
import { auditPrompts } from '../audit/prompts.js'
import { auditSender } from './audit-send.js'
import { X402Payments } from './x402-payment.js'
import { readinessProblems } from './readiness.js'
import { EmbeddingsService } from './embeddings.js'
import type { X402Relay } from '../chain/x402-relay.js'

/** How often the counts of refusals before admission are added to the store. */
const REFUSAL_FLUSH_MS = 1_000
/** How often the store's live offers are read: a provider's change reaches every gateway within it (and a read). */
const OFFERS_READ_MS = 2_000
/** Audits (`audit` in the config): time between two of one offer, and an audit request's output bound. */
const AUDIT_INTERVAL_MS = 600_000
const AUDIT_MAX_TOKENS = 24
const AUDIT_LOCK = 'svc-audits'
/** How often claimed x402 payments left undecided are asked of the chain. */
const X402_RECONCILE_MS = 60_000

export interface GatewayOptions {
  now?: () => number
  makeUpstream?: (baseUrl: string, apiKey: string | undefined, tuning: Tuning, opts: UpstreamOptions) => Provider
  log?: (msg: string, err?: unknown) => void
  /** Structured log lines (access lines, events); silent when absent. */
  logger?: Logger
  /** The rail's x402 facilitator: requests without a key are paid per request (`rail.x402`). */
  x402Relay?: X402Relay
}

/**
 * The gateway's parts, built once from the config and an open store: the chat pipeline, the key verifier, the routing
 * catalog and health, the usage queries and this instance's lifecycle. Each consumer takes only the parts it uses.
 */
export class Gateway {
  readonly tuning: Tuning
  readonly health: Health
  readonly reachability: Reachability
  readonly catalog: Catalog
  readonly keys: KeyVerifier
  readonly lifecycle: InstanceLifecycle
  readonly usage: UsageQueries
  readonly refusals: RefusalCounter
  /** Per-key limits of requests and tokens a minute. */
  readonly rates: RateGate
  /** Probes of idle offers, for their endpoint stats. */
  readonly probes: OfferProbes
  /** Audits of offers, when the config has `audit`. */
  auditor: Auditor | undefined
  /** Whether requests without a key are paid per request with x402 (`rail.x402` on the evm rail). */
  takesX402 = false
  /**
   * What keeps the server from serving (`GET /readyz`): this process's problems, or, for a worker of
   * `svc serve --workers N`, every worker's.
   */
  readiness: () => Promise<string[]> = () => readinessProblems(this)
  readonly now: () => number
  readonly log: (msg: string, err?: unknown) => void
  readonly logger: Logger
  readonly metrics: GatewayMetrics
  private chargeDeps!: ChargeDeps
  private chatPipeline!: ChatPipeline
  private embeddingsService!: EmbeddingsService
  private responsesService!: ResponsesService
  private flushTimer: NodeJS.Timeout | undefined
  private offersTimer: NodeJS.Timeout | undefined
  private x402Timer: NodeJS.Timeout | undefined
  /** The server is stopping: requests in flight finish, new ones are refused (503, retry). */
  stopping = false

  private constructor(
    readonly config: Config,
    readonly store: Store,
    opts: GatewayOptions,
  ) {
    this.tuning = tuningOf(config)
    this.now = opts.now ?? Date.now
    this.logger = opts.logger ?? silentLogger
    this.log = opts.log ?? eventLog(opts.logger)
    this.health = breakers(this.tuning, this.now, this.log)
    this.reachability = new Reachability((provider, reachable, detail) =>
      this.log(
        reachable ? `provider ${provider}: reachable again` : `provider ${provider}: cannot be reached (${detail})`,
      ),
    )
    const make = opts.makeUpstream ?? ((url, key, t, o) => new OpenAICompatibleProvider(url, key, t, o))
    this.catalog = new Catalog(config, (url, key, addresses) =>
      make(url, key, this.tuning, addresses ? { addresses } : {}),
    )
    this.probes = new OfferProbes(this.catalog, this.health, {
      intervalMs: this.tuning.offerProbeIntervalMs,
      now: this.now,
    })
    this.metrics = new GatewayMetrics({
      catalog: this.catalog,
      health: this.health,
      held: () => store.ledger.heldNow(),
      unsettled: () => store.settlement.unsettled(),
      recording: config.metrics !== false,
    })
    if (this.metrics.recording) store.ledger.observeCommits(this.metrics.ledgerCommit)
    this.keys = new KeyVerifier(store, this.tuning.keyCacheMs, this.now)
    this.usage = new UsageQueries(store.usage, store.refusals, this.now)
    this.refusals = new RefusalCounter(store.refusals, (err) => this.log('refusal counts not written', err))
    this.rates = new RateGate({
      counter: config.limits?.redis ? new RedisRates(config.limits.redis) : store.keyRates,
      inHold: !config.limits?.redis,
      onDown: config.limits?.onRedisDown ?? 'open',
      now: this.now,
      log: this.log,
      unchecked: (policy) => this.metrics.rateUnchecked(policy),
    })
    const holdTtlMs = this.tuning.holdTtlSeconds * 1000
    this.lifecycle = new InstanceLifecycle({
      store,
      id: newInstanceId(),
      holdTtlMs,
      now: this.now,
      onError: (err) => this.log('background task failed', err),
      onReleased: (n, atStart) =>
        this.log(
          atStart
            ? `start: released ${n} hold${n === 1 ? '' : 's'} of instances that stopped or died`
            : `sweep: released ${n} hold${n === 1 ? '' : 's'} (expired, or of instances that stopped or died)`,
        ),
    })
  }

  /**
   * Builds the gateway over an open store: provider accounts exist, this instance is registered, stale holds are
   * released.
   */
  static async start(config: Config, store: Store, opts: GatewayOptions = {}): Promise<Gateway> {
    const gw = new Gateway(config, store, opts)
    const now = gw.now()
    const payees = new Map<string, number>()
    for (const p of config.providers) {
      const address = checksumAddress(p.address)
      payees.set(address, (await store.accounts.ensure(address, 'provider', now)).account.id)
    }
    const fees = (await store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!.id
    const vendor = (await store.accounts.byAddress(SYSTEM_ACCOUNTS.vendor))!.id
    const { ledger, usage } = store
    gw.chargeDeps = {
      ledger,
      usage,
      health: gw.health,
      reachability: gw.reachability,
      feeBps: config.feeBps,
      accounts: { fees, vendor, payees },
      now: gw.now,
      log: (msg) => gw.log(msg),
    }
    const x402 =
      opts.x402Relay && new X402Payments({ relay: opts.x402Relay, store: store.x402, now: gw.now, log: gw.log })
    // What the chat pipeline and the embeddings share: the same offers, admission, charge and payments.
    const serving = {
      catalog: gw.catalog,
      health: gw.health,
      admission: store,
      lifecycle: gw.lifecycle,
      charge: gw.chargeDeps,
      holdTtlMs: gw.tuning.holdTtlSeconds * 1000,
      now: gw.now,
      log: gw.log,
      ...(x402 ? { x402 } : {}),
    }
    gw.chatPipeline = new ChatPipeline({
      ...serving,
      idempotency: new Idempotency(store.idempotency, usage, gw.now),
      refusals: gw.refusals,
      ledger,
      rates: gw.rates,
    })
    if (x402) {
      // Payments a crash or a lost answer left undecided are decided by the chain, once their window could have passed.
      gw.x402Timer = setInterval(
        () => void x402.reconcile().catch((err) => gw.log('x402 payments not reconciled', err)),
        X402_RECONCILE_MS,
      )
      gw.x402Timer.unref()
    }
    gw.takesX402 = opts.x402Relay !== undefined
    gw.embeddingsService = new EmbeddingsService(serving)
    gw.responsesService = new ResponsesService(gw.chatPipeline, new ResponseMemory(store.keptResponses, gw.now), gw.log)
    if (config.audit) gw.auditor = await auditorOf(gw, config.audit)
    await gw.lifecycle.start()
    await gw.readOffers()
    gw.offersTimer = setInterval(
      () => void gw.readOffers().catch((err) => gw.log('offers not read', err)),
      OFFERS_READ_MS,
    )
    gw.offersTimer.unref()
    gw.probes.start()
    gw.auditor?.start()
    gw.refusals.start(REFUSAL_FLUSH_MS)
    // Not awaited: a provider that cannot be reached is logged, and the gateway serves the others meanwhile.
    void probeProviders(config, gw.reachability)
    gw.flushTimer = setInterval(
      () => void gw.keys.flushLastUsed().catch((err: unknown) => gw.log('key flush failed', err)),
      5_000,
    )
    gw.flushTimer.unref()
    return gw
  }

  /** Routes to the providers' live offers in the store, beside the config's. */
  async readOffers(): Promise<void> {
    const live = await this.store.providers.liveOffers((err) => {
      if (this.unreadable.has(err.message)) return
      this.unreadable.add(err.message)
      this.log(`offers: an endpoint's offers are left out: ${err.message}`)
    })
    const first = !this.offersRead
    this.offersRead = true
    if (this.catalog.applyLive(live, this.now()) && !first)
      this.log(`offers: the store's live offers changed (${live.length} now)`)
    // Offers are routed by what audits found only while this gateway's config has audits.
    if (this.config.audit) this.catalog.applyStates(await this.store.audits.states())
  }

  private offersRead = false
  /** Endpoints whose API key did not open, logged once each. */
  private readonly unreadable = new Set<string>()

  /** The life of a chat request, from its body to its charge. */
  get pipeline(): ChatPipeline {
    return this.chatPipeline
  }

  /** The Responses API over the same life. */
  get responses(): ResponsesService {
    return this.responsesService
  }

  /** Embeddings: the same admission, failover, charge and record, for a request with no output. */
  get embeddings(): EmbeddingsService {
    return this.embeddingsService
  }

  get accounts(): ChargeDeps['accounts'] {
    return this.chargeDeps.accounts
  }

  /** Ends the requests still being served at the end of the stop's grace (see `ChatPipeline.stopServing`). */
  stopServing(): number {
    return this.chatPipeline.stopServing()
  }

  async close(): Promise<void> {
    if (this.flushTimer) clearInterval(this.flushTimer)
    if (this.offersTimer) clearInterval(this.offersTimer)
    if (this.x402Timer) clearInterval(this.x402Timer)
    await this.probes.stop()
    await this.auditor?.stop()
    await this.keys.flushLastUsed().catch(() => {})
    await this.refusals.stop().catch((err) => this.log('refusal counts not written', err))
    await this.lifecycle.stop().catch(() => {})
    await this.catalog.close()
    await this.rates.close()
  }
}

/** The auditor of the config's `audit`: paid by its wallet's account (created when missing). */
async function auditorOf(gw: Gateway, audit: NonNullable<Config['audit']>): Promise<Auditor> {
  const address = checksumAddress(audit.wallet)
  const { account } = await gw.store.accounts.ensure(address, 'user', gw.now())
  return new Auditor({
    catalog: gw.catalog,
    audits: gw.store.audits,
    held: gw.store.heldEarnings,
    tryLock: () => gw.store.tryLock(AUDIT_LOCK),
    send: auditSender(() => gw.pipeline, { keyId: 'audit', accountId: account.id, address }),
    prompts: auditPrompts(audit.prompts),
    intervalMs: audit.intervalMs ?? AUDIT_INTERVAL_MS,
    maxTokens: audit.maxTokens ?? AUDIT_MAX_TOKENS,
    now: gw.now,
    log: gw.log,
    onResult: gw.metrics.audited,
  })
}

/** The offers' circuit breakers, each change of state logged. */
function breakers(tuning: Tuning, now: () => number, log: (msg: string) => void): Health {
  const { breakerFailures: failures, breakerCooldownMs: cooldownMs } = tuning
  const line = {
    opened: `opened after ${failures} failures in a row`,
    reopened: 'opened again: its probe failed',
    closed: 'closed: an attempt succeeded',
  }
  const probe = `; next probe in ${Math.ceil(cooldownMs / 1000)} s`
  return new Health(
    {
      failures,
      cooldownMs,
      onChange: (key, change) => log(`offer ${key}: breaker ${line[change]}${change === 'closed' ? '' : probe}`),
    },
    now,
  )
}

/** Events as log lines: an error's message and stack as fields of its line; stderr when no logger is given. */
function eventLog(logger: Logger | undefined): (msg: string, err?: unknown) => void {
  if (!logger) return (msg, err) => (err === undefined ? console.error(msg) : console.error(msg, err))
  return (msg, err) => (err === undefined ? logger.info(msg) : logger.error({ err }, msg))
}
