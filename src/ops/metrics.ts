import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { Catalog } from '../routing/catalog.js'
import type { Health } from '../routing/health.js'
import type { RequestTrace } from './trace.js'

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]
const COMMIT_SECONDS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
const GROUP_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
const BREAKER = { closed: 0, 'half-open': 1, open: 2 } as const

/** What a scrape reads of the store when it is taken: open holds and what they hold. */
export interface HeldNow {
  open: number
  held: bigint
}

/** One settlement pass as metrics see it: the batches it settled and those whose outcome stays unknown. */
export interface SettledPass {
  batches: { total: bigint }[]
  unfinished: unknown[]
}

export interface MetricsSources {
  catalog: Catalog
  health: Health
  /** The store's open holds now; asked once a scrape. */
  held: () => Promise<HeldNow>
  /** Captured charges not yet paid to their payees; asked once a scrape. */
  unsettled: () => Promise<bigint>
  /** False when nothing serves the metrics (config `"metrics": false`): requests and commits are not observed. */
  recording: boolean
}

/**
 * The gateway's Prometheus metrics. Labels are bounded sets of the config (models, providers, offers) and closed enums
 * (outcomes, failure kinds): never a request id, a key or a wallet.
 */
export class GatewayMetrics {
  readonly registry = new Registry()
  private readonly requests: Counter<'model' | 'provider' | 'outcome'>
  private readonly duration: Histogram<'model'>
  private readonly ttfb: Histogram<'model'>
  private readonly own: Histogram<'model'>
  private readonly tokens: Counter<'model' | 'direction'>
  private readonly charged: Counter<'model'>
  private readonly fees: Counter<'model'>
  private readonly failures: Counter<'kind'>
  private readonly commitTime: Histogram
  private readonly groupSize: Histogram
  private readonly batches: Counter<'outcome'>
  private readonly settled: Counter
  private readonly unchecked: Counter<'policy'>
  private readonly audits: Counter<'result'>
  private readonly models = new Map<string, ModelSeries>()

  readonly recording: boolean

  constructor(sources: MetricsSources) {
    this.recording = sources.recording
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry })
    const labels = <L extends string>(name: string, help: string, labelNames: L[]) => ({
      name,
      help,
      labelNames,
      registers,
    })
    this.requests = new Counter(
      labels('svc_requests_total', 'Chat requests by model, provider and outcome', ['model', 'provider', 'outcome']),
    )
    const histogram = (name: string, help: string) =>
      new Histogram({ ...labels(name, help, ['model']), buckets: SECONDS })
    this.duration = histogram('svc_request_duration_seconds', 'Total time of a chat request')
    this.ttfb = histogram('svc_time_to_first_byte_seconds', "Time to a chat reply's first byte")
    this.own = histogram('svc_gateway_duration_seconds', "The gateway's own time: total less the upstreams'")
    this.tokens = new Counter(
      labels('svc_tokens_total', 'Tokens billed, by model and direction (in, out)', ['model', 'direction']),
    )
    this.charged = new Counter(labels('svc_charged_usdc_total', 'USDC charged to payers', ['model']))
    this.fees = new Counter(labels('svc_fees_usdc_total', 'USDC of marketplace fees', ['model']))
    this.failures = new Counter(
      labels('svc_upstream_failures_total', 'Upstream attempts that failed, by kind', ['kind']),
    )
    this.commitTime = new Histogram({
      ...labels('svc_ledger_commit_seconds', "A hot-ledger commit's time until durable", []),
      buckets: COMMIT_SECONDS,
    })
    this.groupSize = new Histogram({
      ...labels('svc_ledger_commit_operations', 'Operations (holds, captures, releases) per hot-ledger commit', []),
      buckets: GROUP_SIZES,
    })
    this.batches = new Counter(
      labels('svc_settlement_batches_total', 'Settlement batches: settled, or unfinished (outcome unknown)', [
        'outcome',
      ]),
    )
    this.settled = new Counter(labels('svc_settled_usdc_total', 'USDC paid out by settled batches', []))
    this.unchecked = new Counter(
      labels('svc_rate_limits_unchecked_total', 'Requests of limited keys the rate counter could not check', [
        'policy',
      ]),
    )
    this.audits = new Counter(labels('svc_audits_total', 'Audits of offers by result', ['result']))
    new Gauge({
      ...labels('svc_offers_by_state', 'Offers by verification state, as this gateway last read them', ['state']),
      aggregator: 'first',
      collect() {
        const counts = { verified: 0, unverified: 0, suspect: 0, quarantined: 0 }
        for (const o of [...sources.catalog.offers.values()].flat()) counts[sources.catalog.stateOf(o.key)]++
        for (const [state, n] of Object.entries(counts)) this.set({ state }, n)
      },
    })
    new Gauge({
      ...labels('svc_unsettled_usdc', 'USDC captured and not yet paid out by a settled batch', []),
      aggregator: 'first',
      async collect() {
        this.set(Number(await sources.unsettled()) / 1e6)
      },
    })
    new Gauge({
      ...labels('svc_breaker_state', 'Circuit breaker of each offer: 0 closed, 1 half-open, 2 open', ['offer']),
      aggregator: 'max',
      collect() {
        const offers = [...sources.catalog.offers.values()].flat()
        if (sources.catalog.managed) offers.push(sources.catalog.managed)
        for (const o of offers) this.set({ offer: o.key }, BREAKER[sources.health.breaker(o.key)])
      },
    })
    const held = { at: 0, value: Promise.resolve<HeldNow>({ open: 0, held: 0n }) }
    const heldNow = () => {
      // Both gauges of one scrape read one query.
      if (Date.now() - held.at > 100) Object.assign(held, { at: Date.now(), value: sources.held() })
      return held.value
    }
    new Gauge({
      ...labels('svc_open_holds', 'Holds open in the store', []),
      aggregator: 'first',
      async collect() {
        this.set((await heldNow()).open)
      },
    })
    new Gauge({
      ...labels('svc_held_usdc', 'USDC held by open holds', []),
      aggregator: 'first',
      async collect() {
        this.set(Number((await heldNow()).held) / 1e6)
      },
    })
  }

  /** One finished chat request: its outcome, times, tokens and charge. */
  observe(trace: RequestTrace, totalMs: number): void {
    if (!this.recording) return
    const m = this.ofModel(trace.model ?? 'none')
    this.requests.labels(m.model, trace.provider ?? 'none', trace.outcome ?? 'unknown').inc()
    m.duration.observe(totalMs / 1000)
    m.ttfb.observe((trace.ttfbMs ?? totalMs) / 1000)
    m.own.observe(Math.max(0, totalMs - (trace.upstreamMs ?? 0)) / 1000)
    for (const kind of trace.failures) this.failures.labels(kind).inc()
    if (trace.outcome === 'completed' || trace.cost !== undefined) {
      m.tokensIn.inc(trace.promptTokens ?? 0)
      m.tokensOut.inc(trace.completionTokens ?? 0)
      m.charged.inc(Number(trace.cost ?? 0n) / 1e6)
      m.fees.inc(Number(trace.fee ?? 0n) / 1e6)
    }
  }

  /** One commit of the hot ledger. */
  readonly ledgerCommit = (ops: number, ms: number): void => {
    if (!this.recording) return
    this.commitTime.observe(ms / 1000)
    this.groupSize.observe(ops)
  }

  /** A limited key's request admitted (`open`) or refused (`closed`) while its rate counter was unreachable. */
  rateUnchecked(policy: 'open' | 'closed'): void {
    this.unchecked.labels(policy).inc()
  }

  /** One audit this gateway ran: passed, failed or inconclusive. */
  readonly audited = (result: string): void => {
    this.audits.labels(result).inc()
  }

  /** One settlement pass that ran. */
  settlementPass(pass: SettledPass): void {
    for (const b of pass.batches) this.settled.inc(Number(b.total) / 1e6)
    if (pass.batches.length > 0) this.batches.labels('settled').inc(pass.batches.length)
    if (pass.unfinished.length > 0) this.batches.labels('unfinished').inc(pass.unfinished.length)
  }

  /** A model's series, bound once: labelling on every request would hash its labels each time. */
  private ofModel(model: string): ModelSeries {
    let m = this.models.get(model)
    if (!m) {
      m = {
        model,
        duration: this.duration.labels(model),
        ttfb: this.ttfb.labels(model),
        own: this.own.labels(model),
        tokensIn: this.tokens.labels(model, 'in'),
        tokensOut: this.tokens.labels(model, 'out'),
        charged: this.charged.labels(model),
        fees: this.fees.labels(model),
      }
      this.models.set(model, m)
    }
    return m
  }
}

interface ModelSeries {
  model: string
  duration: { observe(v: number): void }
  ttfb: { observe(v: number): void }
  own: { observe(v: number): void }
  tokensIn: { inc(v: number): void }
  tokensOut: { inc(v: number): void }
  charged: { inc(v: number): void }
  fees: { inc(v: number): void }
}
