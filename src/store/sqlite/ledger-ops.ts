import type BetterSqlite3 from 'better-sqlite3'
import { toAccount } from '../accounts.js'
import { MAX_STORED } from '../chain.js'
import { big } from '../ints.js'
import { isBusyError } from './engine/patient-dialect.js'
import { usageRow, type UsageRecord } from '../usage.js'
import { USAGE_ON_HOLDS } from '../migrations/009_records_written_once.js'
import type { OpenHolds } from '../ledger/open-holds.js'
import { sqliteKeySpend } from './key-spend.js'
import { sqliteRateOps } from './key-rates.js'
import { byCounter, sum, wholeOrEach, type Item } from './engine/group-sets.js'
import {
  capturedClose,
  overCapture,
  recordValues,
  refusalOf,
  refusedValues,
  releasedClose,
  sweptClose,
  RECORD_COLUMNS,
  RECORD_COLUMN_LIST,
  type CaptureRequest,
  type Close,
  type HoldRequest,
  type HoldResult,
} from '../ledger/types.js'

const RECORD_PLACES = RECORD_COLUMN_LIST.map(() => '?').join(', ')

/** One hot-ledger operation as data: what a group runs. */
export type LedgerOp =
  | { kind: 'hold'; hold: HoldRequest }
  | { kind: 'capture'; capture: CaptureRequest }
  | { kind: 'release'; requestId: string; now: number; usage: UsageRecord }
  | { kind: 'record'; usage: UsageRecord }

export type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown }

/**
 * A request's hold, capture and release as prepared statements, many run in ONE immediate transaction (group commit).
 * Counters move once per group and account; a set whose joint write fails runs member by member, and a group that
 * throws rolls back and replays each operation in its own transaction (docs/architecture.md §15.15).
 */
export function sqliteLedgerOps(
  raw: BetterSqlite3.Database,
  open: OpenHolds,
): { runGroup(ops: LedgerOp[]): Outcome[] } {
  const p = (sql: string) => raw.prepare(sql)
  const s = {
    hold: p(
      `UPDATE accounts SET held = held + ? WHERE id = ? AND status = 'active' AND debt = 0 AND balance - held >= ? AND cap - held >= ?`,
    ),
    account: p('SELECT * FROM accounts WHERE id = ?'),
    // On a dead instance's row the CHECK fails: the group is replayed and this hold refused with the error.
    owned: p(`INSERT INTO owner_holds (owner, account_id, held, open) VALUES (?, ?, ?, ?)
      ON CONFLICT (owner, account_id) DO UPDATE SET held = held + excluded.held, open = open + excluded.open`),
    // Not all of it held any more: a sweep released this instance's holds on the account (it took it for dead).
    unowned: p(
      `UPDATE owner_holds SET held = held - ?, open = open - ? WHERE owner = ? AND account_id = ? AND held >= ? AND open >= ?`,
    ),
    // cap - c1 - c2 floored at 0 is cap - c1 floored at 0, then - c2 floored at 0: one write for a set of closes.
    closeAccount: p(
      'UPDATE accounts SET balance = balance - ?, held = held - ?, cap = CASE WHEN cap > ? THEN cap - ? ELSE 0 END WHERE id = ?',
    ),
    record: p(`INSERT INTO holds (${RECORD_COLUMNS}) VALUES (${RECORD_PLACES})`),
    // The record of a request that has none yet: a refusal, or a close that found its hold released by a sweep.
    refused: p(`INSERT OR IGNORE INTO holds (${RECORD_COLUMNS}) VALUES (${RECORD_PLACES})`),
    // Holds of an older version, still rows: released by the sweeps.
    releaseRow:
      p(`UPDATE holds SET status = 'released', closed_at = ?, cost = 0, ${USAGE_ON_HOLDS.map((c) => `${c} = ?`).join(', ')}
      WHERE request_id = ? AND status = 'open' RETURNING account_id, amount`),
    releaseAccount: p('UPDATE accounts SET held = held - ? WHERE id = ?'),
    releasePair: p(
      `INSERT INTO posting_rows (ref, account_id, book, kind, amount, created_at) VALUES (?, ?, 'held', 'release', ?, ?), (?, ?, 'available', 'release', ?, ?)`,
    ),
  }

  const keys = sqliteKeySpend(raw)
  const rates = sqliteRateOps(raw)

  /** The group's changes to `open`, applied once it commits; requests closed in the group, so none closes twice. */
  let staged: (() => void)[] = []
  let closing = new Set<string>()

  /** Why a hold on the account was refused, from its row as it is now. */
  const refusal = (accountId: number): HoldResult => {
    const row = s.account.get(accountId) as Parameters<typeof toAccount>[0] | undefined
    return refusalOf(row && toAccount(row))
  }

  /**
   * Admits a set of holds on one account, all at once or else one by one (refusing the rest); the holds admitted. A
   * hold of a key with a spend limit is then counted against its key, and out of the account again when the key has no
   * room for it (as on Postgres, where the key's write follows the account's).
   */
  const admit = (set: Item<void>[], results: unknown[]): Item<void>[] => {
    const { accountId } = set[0]!.hold
    // A sum past what the store can hold (each hold is within it) could never be covered, and could not be bound.
    const admits = (items: Item<void>[]) => {
      const all = sum(items)
      return all <= MAX_STORED && s.hold.run(all, accountId, all, all).changes === 1
    }
    const held = wholeOrEach(set, admits, ({ at }) => (results[at] = refusal(accountId)))
    const refused = new Set<Item<void>>()
    keys.holdAll(
      held.filter((i) => i.hold.spendReset),
      (item) => {
        s.releaseAccount.run(item.hold.amount, accountId)
        results[item.at] = keys.refusal(item.hold.keyId)
        refused.add(item)
      },
    )
    return refused.size === 0 ? held : held.filter((i) => !refused.has(i))
  }

  /**
   * Admits the group's holds, a set per account at a time, and counts those admitted in this instance's counter. A hold
   * carrying a rate take is counted against its key's rate limits first, and refused when they leave no room.
   */
  const holdAll = (holds: Item<void>[], results: unknown[]): void => {
    const counted = rates.takeAll(holds)
    const allowed = holds.filter(({ at }) => {
      const answer = counted.get(at)
      if (answer && !answer.taken) results[at] = { ok: false, reason: 'rate_limit' }
      return answer?.taken !== false
    })
    for (const set of byCounter(allowed)) {
      const admitted = admit(set, results)
      if (admitted.length === 0) continue
      const { owner, accountId } = admitted[0]!.hold
      s.owned.run(owner, accountId, sum(admitted), admitted.length)
      keys.heldAll(admitted.filter((i) => i.hold.spendReset))
      for (const { at, hold } of admitted) {
        results[at] = { ok: true }
        staged.push(() => open.add(hold))
      }
    }
    for (const [at, { count }] of counted) results[at] = { ...(results[at] as HoldResult), rate: count }
  }

  /** Takes a set of closes of one account from its counters, all at once or else one by one; the closes that held. */
  const unown = (set: Item<Close>[]): Item<Close>[] => {
    const { owner, accountId } = set[0]!.hold
    const takes = (items: Item<Close>[]) => {
      const all = sum(items)
      return s.unowned.run(all, items.length, owner, accountId, all, items.length).changes === 1
    }
    return wholeOrEach(set, takes)
  }

  /**
   * Takes the group's closes from their counters, a set per account at a time; the closes whose holds were still held.
   */
  const takeAll = (closes: Item<Close>[]): Set<Item<Close>> => {
    const held = new Set<Item<Close>>()
    for (const set of byCounter(closes)) {
      const taken = unown(set)
      if (taken.length === 0) continue
      const cost = taken.reduce((total, i) => total + i.then.cost, 0n)
      s.closeAccount.run(cost, sum(taken), cost, cost, taken[0]!.hold.accountId)
      keys.closeAll(taken.filter((i) => i.hold.spendReset))
      for (const item of taken) held.add(item)
    }
    return held
  }

  /** A close's row: the request as it closed, or, when a sweep released its hold first, as abandoned (false). */
  const closeRow = (item: Item<Close>, held: boolean): boolean => {
    if (held) s.record.run(...recordValues(item.hold, item.then))
    else s.refused.run(...recordValues(item.hold, sweptClose(item.then)))
    return held
  }

  /** This instance's open hold of the request, unless the request closed already (in the store or in this group). */
  const openHold = (requestId: string): HoldRequest | undefined => {
    if (closing.has(requestId)) return undefined
    const h = open.get(requestId)
    if (h) {
      closing.add(requestId)
      staged.push(() => open.remove(requestId))
    }
    return h
  }

  /** A release of a hold this instance does not keep open: a row of an older version, or nothing to release. */
  const releaseElse = (requestId: string, now: number, usage: UsageRecord): boolean => {
    const u = usageRow(usage)
    const row = s.releaseRow.get(now, ...USAGE_ON_HOLDS.map((c) => u[c]), requestId) as
      { account_id: bigint; amount: bigint } | undefined
    if (row) {
      s.releaseAccount.run(row.amount, row.account_id)
      s.releasePair.run(
        requestId,
        row.account_id,
        -big(row.amount),
        now,
        requestId,
        row.account_id,
        big(row.amount),
        now,
      )
      return true
    }
    // No hold to release (the request failed before it, or closed already): its usage, unless it has a row.
    s.refused.run(...refusedValues(usage))
    return false
  }

  /**
   * The group's operations: the closes' counters, then every row in the group's order (a close's row before a later
   * release's or record's of the same request, which the row's key then turns away), then the holds; outcomes in the
   * group's order.
   */
  const runOps = (ops: LedgerOp[]): unknown[] => {
    const results: unknown[] = new Array<unknown>(ops.length).fill(undefined)
    const holds: Item<void>[] = []
    const closes: Item<Close>[] = []
    const rows: { at: number; write: () => unknown }[] = []
    let held = new Set<Item<Close>>()
    const close = (item: Item<Close>) => {
      closes.push(item)
      rows.push({ at: item.at, write: () => closeRow(item, held.has(item)) })
    }
    ops.forEach((op, at) => {
      switch (op.kind) {
        case 'hold':
          return void holds.push({ at, hold: op.hold, then: undefined })
        case 'capture': {
          const hold = openHold(op.capture.requestId)
          if (!hold) return void (results[at] = false)
          if (op.capture.cost > hold.amount) throw overCapture(hold.requestId, op.capture.cost, hold.amount)
          return close({ at, hold, then: capturedClose(op.capture) })
        }
        case 'release': {
          const hold = openHold(op.requestId)
          if (!hold) return void rows.push({ at, write: () => releaseElse(op.requestId, op.now, op.usage) })
          return close({ at, hold, then: releasedClose(op.now, op.usage) })
        }
        case 'record':
          return void rows.push({ at, write: () => void s.refused.run(...refusedValues(op.usage)) })
      }
    })
    held = takeAll(closes)
    for (const { at, write } of rows) results[at] = write()
    holdAll(holds, results)
    return results
  }
  const group = raw.transaction(runOps)
  /** Runs `fn` with a fresh stage, applying it only if `fn` returns (its transaction committed). */
  const committed = <T>(fn: () => T): T => {
    staged = []
    closing = new Set()
    const value = fn()
    for (const apply of staged) apply()
    return value
  }

  return {
    runGroup(ops: LedgerOp[]): Outcome[] {
      try {
        return committed(() => group.immediate(ops)).map((value) => ({ ok: true, value }))
      } catch (error) {
        // Locked by another process: every operation alone would find it locked too.
        if (isBusyError(error)) return ops.map(() => ({ ok: false, error }))
        return ops.map((op) => {
          try {
            return { ok: true, value: committed(() => group.immediate([op]))[0] }
          } catch (error) {
            return { ok: false, error }
          }
        })
      }
    },
  }
}
