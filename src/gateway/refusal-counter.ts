import type { RefusalCount, RefusalRepo } from '../store/refusals.js'

const MINUTE_MS = 60_000

/**
 * Counts the requests refused before admission in memory, per account, key, model, code and minute, and adds the
 * counts to the store every `flushMs`: an outage with clients retrying at full speed writes a few rows a second, not
 * one each. A crash loses at most the counts of the last `flushMs`; refusals charge nothing.
 */
export class RefusalCounter {
  private pending = new Map<string, RefusalCount>()
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly repo: RefusalRepo,
    private readonly onError: (err: unknown) => void,
  ) {}

  count(r: Omit<RefusalCount, 'minute' | 'count'>, now: number): void {
    const minute = now - (now % MINUTE_MS)
    const key = `${r.accountId}\u0000${r.keyId}\u0000${r.model}\u0000${r.code}\u0000${minute}`
    const seen = this.pending.get(key)
    if (seen) seen.count++
    else this.pending.set(key, { ...r, minute, count: 1 })
  }

  /** Adds what was counted to the store. */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return
    const counts = [...this.pending.values()]
    this.pending = new Map()
    await this.repo.add(counts)
  }

  start(flushMs: number): void {
    this.timer = setInterval(() => void this.flush().catch(this.onError), flushMs)
    this.timer.unref()
  }

  async stop(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
  }
}
