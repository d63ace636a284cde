/**
 * The chat requests of each account this instance is serving, at most `limit` at once: one account's slow streams
 * cannot take every slot of every offer from the others. Per process, as the offers' own counts are (DESIGN §11).
 */
export class AccountSlots {
  private readonly taken = new Map<number, number>()

  constructor(readonly limit: number) {}

  /** Takes a slot of the account, unless it has `limit` already; a slot taken is given back with `give`. */
  take(account: number): boolean {
    const n = this.taken.get(account) ?? 0
    if (n >= this.limit) return false
    this.taken.set(account, n + 1)
    return true
  }

  give(account: number): void {
    const n = this.taken.get(account) ?? 0
    if (n <= 1) this.taken.delete(account)
    else this.taken.set(account, n - 1)
  }
}
