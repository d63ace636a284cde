import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { toAccount } from './accounts.js'
import { big, num } from './dialect.js'
import type { UsageRecord } from './usage.js'
import { overCapture, refusalOf, usageValues, USAGE_COLUMNS, type CaptureRequest, type HoldRequest, type HoldResult, type HotLedger } from './ledger-types.js'

interface Pending {
  run: () => unknown
  resolve: (v: never) => void
  reject: (e: unknown) => void
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown }

/**
 * The hot ledger on SQLite: cached prepared statements, and group commit. Operations that arrive within one turn of
 * the event loop run in ONE immediate transaction, so page writes to the WAL are shared by the group instead of paid
 * per request. Operations only throw on bugs; then the group rolls back and each operation is replayed in its own
 * transaction, so one failure never takes the others with it. Groups run under Kysely's connection mutex, never
 * inside a Kysely transaction.
 */
export class SqliteHotLedger implements HotLedger {
  private readonly s
  private readonly holdOp
  private readonly captureOp
  private readonly releaseOp
  private queue: Pending[] = []
  /** Groups scheduled or running. */
  private flushes = 0
  private readonly group: BetterSqlite3.Transaction<(ops: Pending[]) => unknown[]>
  private readonly single: BetterSqlite3.Transaction<(op: Pending) => unknown>

  /** `walGate`: when the WAL outgrew its limit, holds the next group until a checkpoint let it start over. */
  constructor(private readonly raw: BetterSqlite3.Database, private readonly db: Kysely<Database>, private readonly walGate?: { beforeWrite(): Promise<void> }) {
    const p = (sql: string) => raw.prepare(sql)
    this.s = {
      hold: p(`UPDATE accounts SET held = held + ? WHERE id = ? AND status = 'active' AND debt = 0 AND balance - held >= ? AND cap - held >= ?`),
      account: p('SELECT * FROM accounts WHERE id = ?'),
      insertHold: p(`INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'open', ?, ?, ?)`),
      posting: p('INSERT INTO postings (ref, account_id, book, kind, amount, created_at) VALUES (?, ?, ?, ?, ?, ?)'),
      openHold: p(`SELECT account_id, amount FROM holds WHERE request_id = ? AND status = 'open'`),
      // Closing a hold and reading what it held is one statement; the separate read is only for a refusal's reason.
      captureHold: p(`UPDATE holds SET status = 'captured', cost = ?, payee_id = ?, fee = ?, closed_at = ? WHERE request_id = ? AND status = 'open' AND amount >= ? RETURNING account_id, amount`),
      captureAccount: p('UPDATE accounts SET balance = balance - ?, held = held - ?, cap = CASE WHEN cap > ? THEN cap - ? ELSE 0 END WHERE id = ?'),
      releaseHold: p(`UPDATE holds SET status = 'released', closed_at = ? WHERE request_id = ? AND status = 'open' RETURNING account_id, amount`),
      releaseAccount: p('UPDATE accounts SET held = held - ? WHERE id = ?'),
      usage: p(`INSERT OR IGNORE INTO usage (${USAGE_COLUMNS}) VALUES (${USAGE_COLUMNS.split(',').map(() => '?').join(', ')})`),
    }
    const s = this.s
    this.holdOp = (h: HoldRequest): HoldResult => {
      if (s.hold.run(h.amount, h.accountId, h.amount, h.amount).changes === 0) {
        const row = s.account.get(h.accountId) as Parameters<typeof toAccount>[0] | undefined
        return refusalOf(row && toAccount(row))
      }
      s.insertHold.run(h.requestId, h.accountId, h.keyId, h.model, h.amount, h.owner, h.now, h.expiresAt)
      s.posting.run(h.requestId, h.accountId, 'held', 'hold', h.amount, h.now)
      s.posting.run(h.requestId, h.accountId, 'available', 'hold', -h.amount, h.now)
      return { ok: true }
    }
    this.captureOp = (c: CaptureRequest): boolean => {
      const hold = s.captureHold.get(c.cost, c.payeeId, c.fee, c.now, c.requestId, c.cost) as { account_id: bigint; amount: bigint } | undefined
      if (!hold) {
        const open = s.openHold.get(c.requestId) as { amount: bigint } | undefined
        if (open) throw overCapture(c.requestId, c.cost, big(open.amount))
        return false
      }
      const accountId = num(hold.account_id)
      const amount = big(hold.amount)
      s.captureAccount.run(c.cost, amount, c.cost, c.cost, accountId)
      const rest = amount - c.cost
      if (rest > 0n) {
        s.posting.run(c.requestId, accountId, 'held', 'release', -rest, c.now)
        s.posting.run(c.requestId, accountId, 'available', 'release', rest, c.now)
      }
      if (c.cost > 0n) {
        s.posting.run(c.requestId, accountId, 'held', 'capture', -c.cost, c.now)
        if (c.cost > c.fee) s.posting.run(c.requestId, c.payeeId, 'pending', 'payout', c.cost - c.fee, c.now)
        if (c.fee > 0n) s.posting.run(c.requestId, c.feeAccountId, 'pending', 'fee', c.fee, c.now)
      }
      s.usage.run(...usageValues(c.usage))
      return true
    }
    this.releaseOp = (requestId: string, now: number, usage: UsageRecord): boolean => {
      const hold = s.releaseHold.get(now, requestId) as { account_id: bigint; amount: bigint } | undefined
      if (hold) {
        s.releaseAccount.run(hold.amount, hold.account_id)
        s.posting.run(requestId, hold.account_id, 'held', 'release', -hold.amount, now)
        s.posting.run(requestId, hold.account_id, 'available', 'release', hold.amount, now)
      }
      s.usage.run(...usageValues(usage))
      return hold !== undefined
    }
    this.group = raw.transaction((ops: Pending[]) => ops.map((op) => op.run()))
    this.single = raw.transaction((op: Pending) => op.run())
  }

  /** Queues an operation for the next group; settles once the group committed. */
  private enqueue<T>(run: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.queue.length === 0) {
        this.flushes++
        setImmediate(() => void this.flush().finally(() => this.flushes--))
      }
      this.queue.push({ run, resolve: resolve as (v: never) => void, reject })
    })
  }

  private async flush(): Promise<void> {
    const ops = this.queue
    this.queue = []
    let outcomes: Outcome[]
    try {
      outcomes = await this.db.connection().execute(async () => {
        await this.walGate?.beforeWrite()
        return this.runGroup(ops)
      })
    } catch (err) {
      for (const op of ops) op.reject(err)
      return
    }
    ops.forEach((op, i) => {
      const o = outcomes[i]!
      if (o.ok) op.resolve(o.value as never)
      else op.reject(o.error)
    })
  }

  private runGroup(ops: Pending[]): Outcome[] {
    try {
      return this.group.immediate(ops).map((value) => ({ ok: true, value }))
    } catch {
      return ops.map((op) => {
        try {
          return { ok: true, value: this.single.immediate(op) }
        } catch (error) {
          return { ok: false, error }
        }
      })
    }
  }

  async drain(): Promise<void> {
    while (this.flushes > 0) await new Promise((resolve) => setTimeout(resolve, 2))
  }

  hold(h: HoldRequest): Promise<HoldResult> {
    return this.enqueue(() => this.holdOp(h))
  }

  capture(c: CaptureRequest): Promise<boolean> {
    return this.enqueue(() => this.captureOp(c))
  }

  release(requestId: string, now: number, usage: UsageRecord): Promise<boolean> {
    return this.enqueue(() => this.releaseOp(requestId, now, usage))
  }
}
