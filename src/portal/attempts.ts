/**
 * Sign-in attempts per client address in fixed one-minute windows, in memory. Nonces are rows in the store and
 * every sign-in costs a signature check, so one address may not ask for them without bound.
 */
export class AttemptLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>()

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number,
  ) {}

  /** Counts one attempt of `client`; null when allowed, else the seconds until its window ends. */
  take(client: string): number | null {
    const now = this.now()
    let w = this.windows.get(client)
    if (!w || now - w.start >= WINDOW_MS) {
      if (this.windows.size >= MAX_TRACKED) this.prune(now)
      w = { start: now, count: 0 }
      this.windows.set(client, w)
    }
    if (w.count >= this.perMinute) return Math.max(1, Math.ceil((w.start + WINDOW_MS - now) / 1000))
    w.count++
    return null
  }

  /** Drops ended windows; under a flood of distinct addresses also the oldest, down to 90 %, so pruning is rare. */
  private prune(now: number): void {
    for (const [client, w] of this.windows) if (now - w.start >= WINDOW_MS) this.windows.delete(client)
    for (const client of this.windows.keys()) {
      if (this.windows.size < MAX_TRACKED * 0.9) break
      this.windows.delete(client)
    }
  }
}

const WINDOW_MS = 60_000
const MAX_TRACKED = 100_000
export const DEFAULT_SIGN_INS_PER_MINUTE = 20
