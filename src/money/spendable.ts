/**
 * Spendable = min(balance, remaining cap) − open holds (docs/architecture.md §4), never below zero; nothing while in
 * debt.
 */
export function spendableOf(a: { balance: bigint; held: bigint; cap: bigint; debt: bigint }): bigint {
  if (a.debt > 0n) return 0n
  const base = a.balance < a.cap ? a.balance : a.cap
  const s = base - a.held
  return s > 0n ? s : 0n
}
