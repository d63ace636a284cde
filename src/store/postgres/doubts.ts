import type { Counter } from '../ledger/types.js'

/**
 * Puts right an `owner_holds` counter in doubt after a hold whose commit's answer was lost. At the next sweep, once no
 * statement works on it, it is lowered (never raised) to what this instance's memory holds, and the account's `held`
 * with it, in one transaction that locks the account first (docs/architecture.md §15.16).
 */
export class Recount {
  /** Statements under way, by counter (`owner account`). */
  private readonly running = new Map<string, number>()
  /** Counters that may count a hold whose answer was lost. */
  private readonly doubted = new Map<string, Counter>()
  /** Holds whose close failed (back in memory), by counter: the counter may already have counted them out. */
  private readonly closing = new Map<string, Set<string>>()
  /** Recounts under way, by counter. */
  private readonly gates = new Map<string, Promise<void>>()

  /** Runs a statement on a counter: after any recount of it, and counted as under way meanwhile. */
  async on<T>(c: Counter, statement: () => Promise<T>): Promise<T> {
    const key = keyOf(c)
    for (let gate = this.gates.get(key); gate; gate = this.gates.get(key)) await gate
    this.running.set(key, (this.running.get(key) ?? 0) + 1)
    try {
      return await statement()
    } finally {
      const n = this.running.get(key)! - 1
      if (n === 0) this.running.delete(key)
      else this.running.set(key, n)
    }
  }

  /** A hold on this counter failed: it may have committed. */
  holdFailed(c: Counter): void {
    this.doubted.set(keyOf(c), c)
  }

  /** A close failed, or (`false`) a later close of the same request settled it. */
  closeFailed(c: Counter, requestId: string, failed = true): void {
    const key = keyOf(c)
    const ids = this.closing.get(key) ?? new Set<string>()
    if (failed) ids.add(requestId)
    else ids.delete(requestId)
    if (ids.size > 0) this.closing.set(key, ids)
    else this.closing.delete(key)
  }

  /**
   * Recounts the counters in doubt that can be now; how many holds they had counted that memory did not have. A
   * counter's new statements wait from the start, and the recount waits for those under way to end (for up to
   * `drainMs`; past it, the counter is left for the next sweep), so a busy counter is recounted too.
   */
  async resolve(recount: (c: Counter) => Promise<number>, drainMs = DRAIN_MS): Promise<number> {
    let lost = 0
    for (const [key, c] of this.doubted) {
      if (this.closing.has(key) || this.gates.has(key)) continue
      let open!: () => void
      this.gates.set(key, new Promise<void>((resolve) => (open = resolve)))
      try {
        if (!(await this.drained(key, drainMs)) || this.closing.has(key)) continue
        lost += await recount(c)
        this.doubted.delete(key)
      } finally {
        this.gates.delete(key)
        open()
      }
    }
    return lost
  }

  /** Resolves true once no statement is under way on the counter, false if some still are after `ms`. */
  private async drained(key: string, ms: number): Promise<boolean> {
    const until = Date.now() + ms
    while (this.running.has(key)) {
      if (Date.now() >= until) return false
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    return true
  }
}

/** How long a recount waits for the statements under way on its counter. */
const DRAIN_MS = 5_000

const keyOf = (c: Counter) => `${c.owner} ${c.accountId}`
