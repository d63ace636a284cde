import type { HoldRequest } from './hold-request.js'
import type { Left } from './lower-counter.js'

/**
 * The holds this gateway instance admitted and has not closed. The store only counts an open hold, in the instance's
 * `owner_holds` row for its account (docs/ledger-written-once.md); its details are here until its request closes and
 * writes its one row. The hot ledger changes this map only once the hold's or close's transaction has committed.
 */
export class OpenHolds {
  private readonly holds = new Map<string, HoldRequest>()

  get(requestId: string): HoldRequest | undefined {
    return this.holds.get(requestId)
  }

  add(h: HoldRequest): void {
    this.holds.set(h.requestId, h)
  }

  remove(requestId: string): void {
    this.holds.delete(requestId)
  }

  /** Extends the leases of these requests' holds (those still open). */
  extend(requestIds: Iterable<string>, expiresAt: number): void {
    for (const id of requestIds) {
      const h = this.holds.get(id)
      if (h) this.holds.set(id, { ...h, expiresAt })
    }
  }

  /** Holds whose lease ran out: their requests were not served any more when the lease was last extended. */
  expired(now: number): HoldRequest[] {
    return [...this.holds.values()].filter((h) => h.expiresAt < now)
  }

  /** What this instance holds under one of its counters (an owner id it held as, on an account), and per key. */
  counted(owner: string, accountId: number): Left {
    let held = 0n
    let open = 0
    const keys = new Map<string, bigint>()
    for (const h of this.holds.values()) {
      if (h.owner !== owner || h.accountId !== accountId) continue
      held += h.amount
      open++
      if (h.spendReset) keys.set(h.keyId, (keys.get(h.keyId) ?? 0n) + h.amount)
    }
    return { held, open, keys }
  }
}
