import type { HoldRequest } from '../../ledger/types.js'

/** A hold or a close of one operation of the group: its place in the group and its request's hold. */
export interface Item<T> {
  at: number
  hold: HoldRequest
  then: T
}

/** Items by what one write may move together: items of the same `key`, in the order first seen. */
export function bySame<I extends Item<unknown>>(items: I[], key: (i: I) => string): I[][] {
  const sets = new Map<string, I[]>()
  for (const item of items) {
    const k = key(item)
    const set = sets.get(k)
    if (set) set.push(item)
    else sets.set(k, [item])
  }
  return [...sets.values()]
}

/** Items by the counters they move: this instance's `owner_holds` row for an account, and that account's row. */
export function byCounter<T>(items: Item<T>[]): Item<T>[][] {
  return bySame(items, (i) => `${i.hold.accountId}\0${i.hold.owner}`)
}

export const sum = (items: Item<unknown>[]) => items.reduce((total, i) => total + i.hold.amount, 0n)

/**
 * The whole set when `passes` writes it at once, or else the members it writes one after another (`failed` told of
 * each of the others as it fails); one write per member when the set is one.
 */
export function wholeOrEach<T>(
  set: Item<T>[],
  passes: (items: Item<T>[]) => boolean,
  failed?: (item: Item<T>) => void,
): Item<T>[] {
  if (passes(set)) return set
  const passed: Item<T>[] = []
  for (const item of set) {
    if (set.length > 1 && passes([item])) passed.push(item)
    else failed?.(item)
  }
  return passed
}
