/**
 * Lone captures in a row (each of a request that had the gateway to itself, from its admission to its capture) before
 * the WAL's sync runs on the event loop: requests come one at a time then, and a sync there spares the capture the two
 * thread wake-ups of a sync on libuv's pool (about 0.1 ms on this project's VM) and delays no one. Under any
 * concurrency it would delay requests on their way (not yet admitted, unseen here); a lone capture now and then (8 %
 * of them at concurrency 4) is no sign of their absence, and syncing those inline cost 13 % of throughput there.
 */
export const ONE_AT_A_TIME = 8

/** Tells the hot ledger whether requests come one at a time, from the holds it commits and the closes it is asked for. */
export class OneAtATime {
  /** Holds committed whose request was not captured or released yet: the requests in flight. */
  private readonly open = new Map<string, { expiresAt: number; admission: number }>()
  private admissions = 0
  /** Lone captures in a row. */
  private lonely = 0

  /** A hold committed: its request is in flight. */
  admitted(requestId: string, expiresAt: number): void {
    this.open.set(requestId, { expiresAt, admission: ++this.admissions })
  }

  /** Its capture or release was asked for. True when no other request was admitted after it: it was alone. */
  leaves(requestId: string): boolean {
    const alone = this.open.get(requestId)?.admission === this.admissions
    this.open.delete(requestId)
    return alone
  }

  /**
   * A group committed captures; `lone`: it was one capture, of a request that was alone. True when the sync that makes
   * them durable may run on the event loop.
   */
  syncInline(lone: boolean, now: number): boolean {
    this.lonely = lone && this.noneInFlight(now) ? this.lonely + 1 : 0
    return this.lonely > ONE_AT_A_TIME
  }

  /** Holds found past their expiry were swept without a word to the ledger: they are let go here. */
  private noneInFlight(now: number): boolean {
    for (const [requestId, { expiresAt }] of this.open) {
      if (expiresAt > now) return false
      this.open.delete(requestId)
    }
    return true
  }
}
