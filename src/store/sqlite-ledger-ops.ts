import type BetterSqlite3 from 'better-sqlite3'
import { toAccount } from './accounts.js'
import { big, num } from './dialect.js'
import { isBusyError } from './sqlite-dialect.js'
import type { UsageRecord } from './usage.js'
import { overCapture, refusalOf, usageValues, USAGE_COLUMNS, type CaptureRequest, type HoldRequest, type HoldResult } from './ledger-types.js'

/** One hot-ledger operation as data: what a group runs. */
export type LedgerOp =
  | { kind: 'hold'; hold: HoldRequest }
  | { kind: 'capture'; capture: CaptureRequest }
  | { kind: 'release'; requestId: string; now: number; usage: UsageRecord }
  | { kind: 'record'; usage: UsageRecord }

export type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown }

/**
 * The hold, capture and release of a request as prepared statements on one SQLite connection, and the group commit
 * that runs many of them in ONE immediate transaction (page writes to the WAL are shared by the group instead of
 * paid per request). Operations only throw on bugs; then the group rolls back and each operation is replayed in its
 * own transaction, so one failure never takes the others with it. A database locked by another process fails every
 * operation with SQLITE_BUSY, having done nothing (the caller retries).
 */
export function sqliteLedgerOps(raw: BetterSqlite3.Database): { runGroup(ops: LedgerOp[]): Outcome[] } {
  const p = (sql: string) => raw.prepare(sql)
  const s = {
    hold: p(`UPDATE accounts SET held = held + ? WHERE id = ? AND status = 'active' AND debt = 0 AND balance - held >= ? AND cap - held >= ?`),
    account: p('SELECT * FROM accounts WHERE id = ?'),
    insertHold: p(`INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'open', ?, ?, ?)`),
    // A request's postings are one statement each time, not one per row: each statement run from JS costs its call
    // and its reset, more than the row. A capture's zero amounts are the postings it does not make (the ledger lets
    // only charges through: 0 ≤ fee ≤ cost ≤ held, so no amount here is of the wrong sign).
    pair: p(`INSERT INTO postings (ref, account_id, book, kind, amount, created_at) VALUES (?, ?, 'held', ?, ?, ?), (?, ?, 'available', ?, ?, ?)`),
    capturePostings: p(`INSERT INTO postings (ref, account_id, book, kind, amount, created_at)
      SELECT ?, column1, column2, column3, column4, ? FROM (VALUES
        (?, 'held', 'release', ?), (?, 'available', 'release', ?), (?, 'held', 'capture', ?), (?, 'pending', 'payout', ?), (?, 'pending', 'fee', ?)
      ) WHERE column4 <> 0`),
    openHold: p(`SELECT account_id, amount FROM holds WHERE request_id = ? AND status = 'open'`),
    // Closing a hold and reading what it held is one statement; the separate read is only for a refusal's reason.
    captureHold: p(`UPDATE holds SET status = 'captured', cost = ?, payee_id = ?, fee = ?, closed_at = ? WHERE request_id = ? AND status = 'open' AND amount >= ? RETURNING account_id, amount`),
    captureAccount: p('UPDATE accounts SET balance = balance - ?, held = held - ?, cap = CASE WHEN cap > ? THEN cap - ? ELSE 0 END WHERE id = ?'),
    releaseHold: p(`UPDATE holds SET status = 'released', closed_at = ? WHERE request_id = ? AND status = 'open' RETURNING account_id, amount`),
    releaseAccount: p('UPDATE accounts SET held = held - ? WHERE id = ?'),
    usage: p(`INSERT OR IGNORE INTO usage (${USAGE_COLUMNS}) VALUES (${USAGE_COLUMNS.split(',').map(() => '?').join(', ')})`),
  }

  /** Moves `amount` into the held book from the available one (a negative amount moves it back), in one statement. */
  const heldPair = (ref: string, accountId: number | bigint, kind: 'hold' | 'release', amount: bigint, now: number) =>
    s.pair.run(ref, accountId, kind, amount, now, ref, accountId, kind, -amount, now)

  const hold = (h: HoldRequest): HoldResult => {
    if (s.hold.run(h.amount, h.accountId, h.amount, h.amount).changes === 0) {
      const row = s.account.get(h.accountId) as Parameters<typeof toAccount>[0] | undefined
      return refusalOf(row && toAccount(row))
    }
    s.insertHold.run(h.requestId, h.accountId, h.keyId, h.model, h.amount, h.owner, h.now, h.expiresAt)
    heldPair(h.requestId, h.accountId, 'hold', h.amount, h.now)
    return { ok: true }
  }

  const capture = (c: CaptureRequest): boolean => {
    const held = s.captureHold.get(c.cost, c.payeeId, c.fee, c.now, c.requestId, c.cost) as { account_id: bigint; amount: bigint } | undefined
    if (!held) {
      const open = s.openHold.get(c.requestId) as { amount: bigint } | undefined
      if (open) throw overCapture(c.requestId, c.cost, big(open.amount))
      return false
    }
    const accountId = num(held.account_id)
    const amount = big(held.amount)
    s.captureAccount.run(c.cost, amount, c.cost, c.cost, accountId)
    const rest = amount - c.cost
    s.capturePostings.run(c.requestId, c.now, accountId, -rest, accountId, rest, accountId, -c.cost, c.payeeId, c.cost - c.fee, c.feeAccountId, c.fee)
    s.usage.run(...usageValues(c.usage))
    return true
  }

  const release = (requestId: string, now: number, usage: UsageRecord): boolean => {
    const held = s.releaseHold.get(now, requestId) as { account_id: bigint; amount: bigint } | undefined
    if (held) {
      s.releaseAccount.run(held.amount, held.account_id)
      heldPair(requestId, held.account_id, 'release', -big(held.amount), now)
    }
    s.usage.run(...usageValues(usage))
    return held !== undefined
  }

  const run = (op: LedgerOp): unknown => {
    switch (op.kind) {
      case 'hold': return hold(op.hold)
      case 'capture': return capture(op.capture)
      case 'release': return release(op.requestId, op.now, op.usage)
      case 'record': return void s.usage.run(...usageValues(op.usage))
    }
  }
  const group = raw.transaction((ops: LedgerOp[]) => ops.map(run))
  const single = raw.transaction(run)

  return {
    runGroup(ops: LedgerOp[]): Outcome[] {
      try {
        return group.immediate(ops).map((value) => ({ ok: true, value }))
      } catch (error) {
        // Locked by another process: every operation alone would find it locked too.
        if (isBusyError(error)) return ops.map(() => ({ ok: false, error }))
        return ops.map((op) => {
          try {
            return { ok: true, value: single.immediate(op) }
          } catch (error) {
            return { ok: false, error }
          }
        })
      }
    },
  }
}
