import type BetterSqlite3 from 'better-sqlite3'
import { KEY_CLOSE, KEY_HELD, KEY_HOLD, KEY_SPEND_ROW, KEY_UNHELD, keyValues, toKeySpend } from '../ledger/key-spend.js'
import type { HoldRequest, HoldResult } from '../ledger/types.js'

/** SQLite names GREATEST `max`. */
const sqlite = (sql: string) => sql.replaceAll('GREATEST(', 'max(')

/**
 * The spend-limit writes of keys with a limit, as prepared statements a hot-ledger group runs inside its transaction:
 * a hold counted against its key once its account admitted it, and a close.
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
  const only = (v: ReturnType<typeof keyValues>, ...names: (keyof typeof v)[]) =>
    Object.fromEntries(names.map((n) => [n, v[n]]))
  return {
    /** Counts the hold against its key's limit; false when the limit does not leave room for it. */
    hold(h: HoldRequest): boolean {
      return s.hold.run(only(keyValues(h, h.now), 'key', 'amount', 'period', 'reset')).changes === 1
    },
    /** Counts the admitted hold in this instance's counter of the key. */
    held(h: HoldRequest): void {
      s.held.run(only(keyValues(h, h.now), 'owner', 'key', 'amount'))
    },
    /** Closes a counted hold at `now`, its charge `cost`. */
    close(h: HoldRequest, now: number, cost: bigint): void {
      const v = keyValues(h, now, cost)
      s.close.run(only(v, 'key', 'amount', 'cost', 'period', 'reset'))
      s.unheld.run(only(v, 'owner', 'key', 'amount'))
    },
    /** The refusal of a hold its key's limit left no room for. */
    refusal(keyId: string): HoldResult {
      const row = s.row.get(keyId) as Parameters<typeof toKeySpend>[0] | undefined
      return row ? { ok: false, reason: 'key_limit', key: toKeySpend(row) } : { ok: false, reason: 'missing' }
    },
  }
}

export type SqliteKeySpend = ReturnType<typeof sqliteKeySpend>
