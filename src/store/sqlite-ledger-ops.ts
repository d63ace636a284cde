import type BetterSqlite3 from 'better-sqlite3'
import { toAccount } from './accounts.js'
import { big } from './dialect.js'
import { isBusyError } from './sqlite-dialect.js'
import { usageRow, type UsageRecord } from './usage.js'
import { USAGE_ON_HOLDS } from './migrations/009_records_written_once.js'
import type { OpenHolds } from './open-holds.js'
import { capturedClose, overCapture, recordValues, refusalOf, refusedValues, releasedClose, sweptClose, RECORD_COLUMNS, type CaptureRequest, type Close, type HoldRequest, type HoldResult } from './ledger-types.js'

const RECORD_PLACES = RECORD_COLUMNS.split(',').map(() => '?').join(', ')

/** One hot-ledger operation as data: what a group runs. */
export type LedgerOp =
  | { kind: 'hold'; hold: HoldRequest }
  | { kind: 'capture'; capture: CaptureRequest }
  | { kind: 'release'; requestId: string; now: number; usage: UsageRecord }
  | { kind: 'record'; usage: UsageRecord }

export type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown }

/**
 * The hold, capture and release of a request as prepared statements on one SQLite connection, and the group commit that
 * runs many of them in ONE immediate transaction (page writes to the WAL are shared by the group instead of paid per
 * request). A request's record is written once, when it closes (docs/ledger-written-once.md): admission updates two
 * counters, the account's `held` (the conditional write that admits) and this instance's `owner_holds` row for the
 * account, and keeps the hold in `open`; the capture or release then inserts the request's one row with its usage (the
 * row stands for its postings too: the `postings` view derives them, migration 010) and the counters' updates. `open`
 * changes only once the group has committed. Operations only throw on bugs, or on a hold by an instance a sweep took
 * for dead (its counters refuse it); then the group rolls back and each operation is replayed in its own transaction,
 * so one failure never takes the others with it. A database locked by another process fails every operation with
 * SQLITE_BUSY, having done nothing (the caller retries).
 */
export function sqliteLedgerOps(raw: BetterSqlite3.Database, open: OpenHolds): { runGroup(ops: LedgerOp[]): Outcome[] } {
  const p = (sql: string) => raw.prepare(sql)
  const s = {
    hold: p(`UPDATE accounts SET held = held + ? WHERE id = ? AND status = 'active' AND debt = 0 AND balance - held >= ? AND cap - held >= ?`),
    account: p('SELECT * FROM accounts WHERE id = ?'),
    // On a dead instance's row the CHECK fails: the group is replayed and this hold refused with the error.
    owned: p(`INSERT INTO owner_holds (owner, account_id, held, open) VALUES (?, ?, ?, 1)
      ON CONFLICT (owner, account_id) DO UPDATE SET held = held + excluded.held, open = open + 1`),
    // Nothing held any more: a sweep released this instance's holds on the account (it took it for dead).
    unowned: p(`UPDATE owner_holds SET held = held - ?, open = open - 1 WHERE owner = ? AND account_id = ? AND held >= ? AND open > 0`),
    closeAccount: p('UPDATE accounts SET balance = balance - ?, held = held - ?, cap = CASE WHEN cap > ? THEN cap - ? ELSE 0 END WHERE id = ?'),
    record: p(`INSERT INTO holds (${RECORD_COLUMNS}) VALUES (${RECORD_PLACES})`),
    // The record of a request that has none yet: a refusal, or a close that found its hold released by a sweep.
    refused: p(`INSERT OR IGNORE INTO holds (${RECORD_COLUMNS}) VALUES (${RECORD_PLACES})`),
    // Holds of an older version, still rows: released by the sweeps.
    releaseRow: p(`UPDATE holds SET status = 'released', closed_at = ?, cost = 0, ${USAGE_ON_HOLDS.map((c) => `${c} = ?`).join(', ')}
      WHERE request_id = ? AND status = 'open' RETURNING account_id, amount`),
    releaseAccount: p('UPDATE accounts SET held = held - ? WHERE id = ?'),
    releasePair: p(`INSERT INTO posting_rows (ref, account_id, book, kind, amount, created_at) VALUES (?, ?, 'held', 'release', ?, ?), (?, ?, 'available', 'release', ?, ?)`),
  }

  /** The group's changes to `open`, applied once it commits; requests closed in the group, so none closes twice. */
  let staged: (() => void)[] = []
  let closing = new Set<string>()

  const hold = (h: HoldRequest): HoldResult => {
    if (s.hold.run(h.amount, h.accountId, h.amount, h.amount).changes === 0) {
      const row = s.account.get(h.accountId) as Parameters<typeof toAccount>[0] | undefined
      return refusalOf(row && toAccount(row))
    }
    s.owned.run(h.owner, h.accountId, h.amount)
    staged.push(() => open.add(h))
    return { ok: true }
  }

  /** Closes an open hold of this instance: false when a sweep released it first (then only its record is written). */
  const close = (h: HoldRequest, c: Close): boolean => {
    if (c.cost > h.amount) throw overCapture(h.requestId, c.cost, h.amount)
    if (s.unowned.run(h.amount, h.owner, h.accountId, h.amount).changes === 0) {
      s.refused.run(...recordValues(h, sweptClose(c)))
      return false
    }
    s.closeAccount.run(c.cost, h.amount, c.cost, c.cost, h.accountId)
    s.record.run(...recordValues(h, c))
    return true
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

  const capture = (c: CaptureRequest): boolean => {
    const h = openHold(c.requestId)
    if (!h) return false
    return close(h, capturedClose(c))
  }

  const release = (requestId: string, now: number, usage: UsageRecord): boolean => {
    const h = openHold(requestId)
    if (h) return close(h, releasedClose(now, usage))
    const u = usageRow(usage)
    const row = s.releaseRow.get(now, ...USAGE_ON_HOLDS.map((c) => u[c]), requestId) as { account_id: bigint; amount: bigint } | undefined
    if (row) {
      s.releaseAccount.run(row.amount, row.account_id)
      s.releasePair.run(requestId, row.account_id, -big(row.amount), now, requestId, row.account_id, big(row.amount), now)
      return true
    }
    // No hold to release (the request failed before it, or closed already): its usage, unless it has a row.
    s.refused.run(...refusedValues(usage))
    return false
  }

  const run = (op: LedgerOp): unknown => {
    switch (op.kind) {
      case 'hold': return hold(op.hold)
      case 'capture': return capture(op.capture)
      case 'release': return release(op.requestId, op.now, op.usage)
      case 'record': return void s.refused.run(...refusedValues(op.usage))
    }
  }
  const group = raw.transaction((ops: LedgerOp[]) => ops.map(run))
  const single = raw.transaction(run)
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
            return { ok: true, value: committed(() => single.immediate(op)) }
          } catch (error) {
            return { ok: false, error }
          }
        })
      }
    },
  }
}
