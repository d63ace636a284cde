/**
 * Lone captures in a row (each of a request that had the gateway to itself, from its admission to its capture) before
 * the WAL's sync runs on the event loop rather than libuv's pool; a lone capture now and then is no sign that requests
 * come one at a time (docs/architecture.md §15.6).
 */
export const ONE_AT_A_TIME = 8

/**
 * Tells the hot ledger whether requests come one at a time, from the holds it commits and the captures and releases
 * it is asked for. Every hold of this process leaves through one of them (a request's own, or a sweep's release), so
 * what is open here is exactly what is in flight.
 */
export class OneAtATime {
  /** Open holds by request id, with the number of their admission. */
  private readonly open = new Map<string, number>()
  private admissions = 0
  /** Lone captures in a row. */
  private lonely = 0

  /** A hold committed: its request is in flight. */
  admitted(requestId: string): void {
    this.open.set(requestId, ++this.admissions)
  }

  /** Its capture or release was asked for. True when no other request was admitted after it: it was alone. */
  leaves(requestId: string): boolean {
    const alone = this.open.get(requestId) === this.admissions
    this.open.delete(requestId)
    return alone
  }

  /**
   * A group committed captures; `lone`: it was one capture, of a request that was alone. True when the sync that makes
   * them durable may run on the event loop.
   */
  syncInline(lone: boolean): boolean {
    this.lonely = lone && this.open.size === 0 ? this.lonely + 1 : 0
    return this.lonely > ONE_AT_A_TIME
  }
}
