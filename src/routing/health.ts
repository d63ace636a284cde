import { OfferChecks } from './offer-checks.js'
import { OfferStats } from './offer-stats.js'

/**
 * Per-offer health: a circuit breaker, a latency average and the in-flight count (per process, docs/architecture.md
 * §11).
 */
export type BreakerState = 'closed' | 'open' | 'half-open'

interface OfferState {
  failures: number
  openUntil: number
  probing: boolean
  inflight: number
  latencyMs: number
  /** Output tokens a second after the first event, averaged over successful attempts that reported usage. */
  tokensPerSecond: number
}

export interface HealthOptions {
  /** Consecutive failures that open the breaker. */
  failures: number
  /** How long an open breaker keeps the offer out before one probe may pass. */
  cooldownMs: number
  /** Told when an offer's breaker opens (again, after a failed probe) or closes (an attempt succeeded), for the log. */
  onChange?: (key: string, change: 'opened' | 'reopened' | 'closed') => void
}

const LATENCY_WEIGHT = 0.2

/** A moving average's next value: the first sample as it is, then each weighted LATENCY_WEIGHT. */
const averaged = (avg: number, sample: number) => (avg === 0 ? sample : avg + LATENCY_WEIGHT * (sample - avg))

export class Health {
  private readonly states = new Map<string, OfferState>()
  /** What each offer's attempts measured: uptime, time to first token, throughput (GET /v1/models/{id}/endpoints). */
  readonly stats: OfferStats
  /** What each offer's delivered replies showed against the gateway's own count (GET /v1/models/{id}/endpoints). */
  readonly checks: OfferChecks

  constructor(
    private readonly opts: HealthOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.stats = new OfferStats(now)
    this.checks = new OfferChecks(now)
  }

  private state(key: string): OfferState {
    let s = this.states.get(key)
    if (!s) {
      s = { failures: 0, openUntil: 0, probing: false, inflight: 0, latencyMs: 0, tokensPerSecond: 0 }
      this.states.set(key, s)
    }
    return s
  }

  breaker(key: string): BreakerState {
    const s = this.states.get(key)
    if (!s || s.failures < this.opts.failures) return 'closed'
    return this.now() >= s.openUntil ? 'half-open' : 'open'
  }

  inflight(key: string): number {
    return this.states.get(key)?.inflight ?? 0
  }

  latency(key: string): number {
    return this.states.get(key)?.latencyMs ?? 0
  }

  /** Takes a slot for an attempt: false when at maxConcurrency, open, or half-open with its probe already out. */
  acquire(key: string, maxConcurrency: number): boolean {
    const s = this.state(key)
    if (s.inflight >= maxConcurrency) return false
    const b = this.breaker(key)
    if (b === 'open') return false
    if (b === 'half-open') {
      if (s.probing) return false
      s.probing = true
    }
    s.inflight++
    return true
  }

  /** Measured output tokens a second (0 until a successful attempt reported its usage). */
  throughput(key: string): number {
    return this.states.get(key)?.tokensPerSecond ?? 0
  }

  /**
   * Returns the slot and records the outcome of the attempt, with its time to the first event and the output tokens a
   * second after it, when known.
   */
  release(key: string, outcome: 'success' | 'failure' | 'neutral', latencyMs?: number, tokensPerSecond?: number): void {
    const s = this.state(key)
    s.inflight--
    if (outcome !== 'neutral') this.stats.record(key, outcome === 'success', latencyMs, tokensPerSecond)
    const wasProbe = s.probing && s.failures >= this.opts.failures
    s.probing = false
    if (outcome === 'success') {
      if (s.failures >= this.opts.failures) this.opts.onChange?.(key, 'closed')
      s.failures = 0
      if (latencyMs !== undefined) s.latencyMs = averaged(s.latencyMs, latencyMs)
      if (tokensPerSecond !== undefined) s.tokensPerSecond = averaged(s.tokensPerSecond, tokensPerSecond)
    } else if (outcome === 'failure') {
      s.failures++
      if (s.failures >= this.opts.failures || wasProbe) {
        s.openUntil = this.now() + this.opts.cooldownMs
        if (wasProbe) this.opts.onChange?.(key, 'reopened')
        else if (s.failures === this.opts.failures) this.opts.onChange?.(key, 'opened')
      }
    }
  }

  /**
   * Seconds until the earliest of these offers' breakers half-opens (an offer whose breaker is not open: now); at least
   * 1.
   */
  retryAfterSeconds(keys: readonly string[]): number {
    const now = this.now()
    let earliest = Infinity
    for (const k of keys) {
      earliest = Math.min(earliest, this.breaker(k) === 'open' ? this.state(k).openUntil - now : 0)
    }
    return earliest === Infinity ? 1 : Math.max(1, Math.ceil(earliest / 1000))
  }
}
