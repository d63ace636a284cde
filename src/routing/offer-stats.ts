const MINUTE_MS = 60_000
const DAY_MINUTES = 1_440
/** Samples of latency and throughput kept per offer (the newest), for their medians over the last hour. */
const SAMPLES = 512
const HOUR_MS = 3_600_000

interface Series {
  /** Attempts by minute of the clock (minute number → outcomes), the last day's. */
  minutes: Map<number, { ok: number; failed: number }>
  /** When the offer was last attempted (or probed). */
  lastAt: number
  /** The newest samples: when, time to first token (ms), output tokens a second (NaN when unknown). */
  samples: { at: number; ttftMs: number; tps: number }[]
}

/**
 * What an offer's traffic measured in this process: its attempts' outcomes by minute over the last day (its uptime)
 * and the newest samples of time to first token and throughput (their medians). Neutral attempts (the client left,
 * the request itself was refused) count in neither.
 */
export class OfferStats {
  private readonly series = new Map<string, Series>()

  constructor(private readonly now: () => number = Date.now) {}

  record(key: string, ok: boolean, ttftMs?: number, tps?: number): void {
    const now = this.now()
    let s = this.series.get(key)
    if (!s) this.series.set(key, (s = { minutes: new Map(), lastAt: now, samples: [] }))
    s.lastAt = now
    const minute = Math.floor(now / MINUTE_MS)
    const bucket = s.minutes.get(minute) ?? { ok: 0, failed: 0 }
    if (ok) bucket.ok++
    else bucket.failed++
    s.minutes.set(minute, bucket)
    if (s.minutes.size > DAY_MINUTES + 1)
      for (const m of s.minutes.keys()) if (m <= minute - DAY_MINUTES) s.minutes.delete(m)
    if (ok && ttftMs !== undefined) {
      s.samples.push({ at: now, ttftMs, tps: tps ?? NaN })
      if (s.samples.length > SAMPLES) s.samples.shift()
    }
  }

  /** When the offer was last attempted or probed (epoch ms); 0 if never. */
  lastAttempt(key: string): number {
    return this.series.get(key)?.lastAt ?? 0
  }

  /** The share of attempts that succeeded over the last `windowMs`; null when there were none. */
  uptime(key: string, windowMs: number): number | null {
    const s = this.series.get(key)
    if (!s) return null
    const from = Math.floor((this.now() - windowMs) / MINUTE_MS)
    let ok = 0
    let all = 0
    for (const [minute, b] of s.minutes) {
      if (minute <= from) continue
      ok += b.ok
      all += b.ok + b.failed
    }
    return all === 0 ? null : ok / all
  }

  /** Medians of the last hour's samples: time to first token (ms) and throughput (tokens a second); null if none. */
  medians(key: string): { ttftMs: number | null; tps: number | null } {
    const since = this.now() - HOUR_MS
    const recent = (this.series.get(key)?.samples ?? []).filter((x) => x.at >= since)
    return {
      ttftMs: median(recent.map((x) => x.ttftMs)),
      tps: median(recent.map((x) => x.tps).filter((x) => !Number.isNaN(x))),
    }
  }
}

function median(xs: number[]): number | null {
  if (xs.length === 0) return null
  const v = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(v.length / 2)
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2
}
