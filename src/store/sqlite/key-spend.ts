import type BetterSqlite3 from 'better-sqlite3'
import { KEY_CLOSE, KEY_HELD, KEY_HOLD, KEY_SPEND_ROW, KEY_UNHELD, toKeySpend } from '../ledger/key-spend.js'
import type { Close, HoldResult } from '../ledger/types.js'
import { periodStart } from '../../limits/period.js'
import { bySame, sum, wholeOrEach, type Item } from './engine/group-sets.js'

/** SQLite names GREATEST `max`. */
const sqlite = (sql: string) => sql.replaceAll('GREATEST(', 'max(')

/** A write of holds of one key counted in the period of `now`, under the reset they were admitted with. */
const inPeriod = (i: Item<unknown>, now: number) => {
  const reset = i.hold.spendReset ?? 'none'
  return { key: i.hold.keyId, reset, period: periodStart(reset, now) }
}
const periodKey = (i: Item<unknown>, now: number) => {
  const { key, reset, period } = inPeriod(i, now)
  return `${key}\0${reset}\0${period}`
}

/**
 * The spend-limit writes of keys with a limit, as prepared statements a hot-ledger group runs inside its transaction:
 * holds counted against their keys once their account admitted them, and closes. Holds and closes of one key and
 * period move the key's row once, as the account's sets move its row (a set of holds whose sum does not fit is counted
 * member by member); the instance's counter of each key moves once per group.
 */
export function sqliteKeySpend(raw: BetterSqlite3.Database) {
  const p = (sql: string) => raw.prepare(sqlite(sql))
  const s = {
    hold: p(KEY_HOLD),
    close: p(KEY_CLOSE),
    held: p(KEY_HELD),
    unheld: p(KEY_UNHELD),
    row: p(`${KEY_SPEND_ROW} WHERE id = ?`),
  }
  /** Each owner's and key's total of `items`. */
  const perCounter = (items: Item<unknown>[]) =>
    bySame(items, (i) => `${i.hold.owner}\0${i.hold.keyId}`).map((set) => ({
      owner: set[0]!.hold.owner,
      key: set[0]!.hold.keyId,
      amount: sum(set),
    }))
  return {
    /**
     * Counts holds an account admitted against their keys' limits; those a limit left no room for are handed to
     * `refused`.
     */
    holdAll(holds: Item<void>[], refused: (i: Item<void>) => void): void {
      const fits = (set: Item<void>[]) =>
        s.hold.run({ ...inPeriod(set[0]!, set[0]!.hold.now), amount: sum(set) }).changes === 1
      for (const set of bySame(holds, (i) => periodKey(i, i.hold.now))) wholeOrEach(set, fits, refused)
    },
    /** Counts admitted holds in this instance's counters of their keys. */
    heldAll(holds: Item<void>[]): void {
      for (const c of perCounter(holds)) s.held.run(c)
    },
    /** Closes counted holds, each in the period of its close, and takes them out of the instance's counters. */
    closeAll(closes: Item<Close>[]): void {
      for (const set of bySame(closes, (i) => periodKey(i, i.then.closedAt))) {
        const cost = set.reduce((all, i) => all + i.then.cost, 0n)
        s.close.run({ ...inPeriod(set[0]!, set[0]!.then.closedAt), amount: sum(set), cost })
      }
      for (const c of perCounter(closes)) s.unheld.run(c)
    },
    /** The refusal of a hold its key's limit left no room for. */
    refusal(keyId: string): HoldResult {
      const row = s.row.get(keyId) as Parameters<typeof toKeySpend>[0] | undefined
      return row ? { ok: false, reason: 'key_limit', key: toKeySpend(row) } : { ok: false, reason: 'missing' }
    },
  }
}

export type SqliteKeySpend = ReturnType<typeof sqliteKeySpend>
