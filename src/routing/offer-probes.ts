import { Cancel } from '../providers/cancel.js'
import type { UpstreamEvent, UpstreamRequest } from '../providers/types.js'
import type { Catalog, Offer } from './catalog.js'
import type { Health } from './health.js'

/** Longest a probe waits for its first event. */
const PROBE_TIMEOUT_MS = 10_000
const PROBE: UpstreamRequest = {
  bodyJson: JSON.stringify({ messages: [{ role: 'user', content: 'Say OK.' }] }),
  stream: true,
  maxTokens: 1,
}

/**
 * Keeps the endpoint stats of idle offers current (GET /v1/models/{id}/endpoints): an offer with no attempt for
 * `intervalMs` is asked for one token, and whether it answered, and how soon, is counted in its uptime and time to
 * first token. A probe moves no breaker (an idle offer's health is for its next request to find) and costs no one.
 */
export class OfferProbes {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<unknown> | undefined

  constructor(
    private readonly catalog: Catalog,
    private readonly health: Health,
    private readonly opts: { intervalMs: number; now: () => number },
  ) {}

  start(): void {
    if (this.opts.intervalMs <= 0) return
    this.timer = setInterval(() => void this.probeIdle(), this.opts.intervalMs)
    this.timer.unref()
  }

  /** Probes every offer idle for the interval (the managed vendor's too); how many. Waits for a round under way. */
  async probeIdle(): Promise<number> {
    if (this.running) await this.running
    const now = this.opts.now()
    const offers = [...this.catalog.offers.values()].flat()
    if (this.catalog.managed) offers.push(this.catalog.managed)
    const idle = offers.filter((o) => now - this.health.stats.lastAttempt(o.key) >= this.opts.intervalMs)
    this.running = Promise.all(idle.map((o) => this.probe(o)))
    await this.running
    this.running = undefined
    return idle.length
  }

  private async probe(o: Offer): Promise<void> {
    const cancel = new Cancel()
    const timer = setTimeout(() => cancel.abort(), PROBE_TIMEOUT_MS)
    const started = this.opts.now()
    let first: UpstreamEvent | undefined
    try {
      // An embedding model's offer is asked for one vector, as its clients ask it.
      if (this.catalog.models.get(o.modelId)?.capabilities.workload === 'embedding') {
        const got = o.upstream.embed ? await o.upstream.embed(o.upstreamModel, { inputs: ['OK'] }, cancel) : undefined
        const ok = got?.kind === 'embedded'
        return this.health.stats.record(o.key, ok, ok ? this.opts.now() - started : undefined)
      }
      for await (const events of o.upstream.stream(o.upstreamModel, PROBE, cancel)) {
        first = events.find((e) => e.type === 'failure') ?? events[0]
        break
      }
    } catch {
      first = undefined
    } finally {
      clearTimeout(timer)
      cancel.abort()
    }
    const ok = first !== undefined && first.type !== 'failure'
    this.health.stats.record(o.key, ok, ok ? this.opts.now() - started : undefined)
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    await this.running
  }
}
