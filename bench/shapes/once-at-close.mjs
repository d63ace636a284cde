// A PROTOTYPE of the hot ledger, for measurement only: "a request's record written once, when it closes".
// Admission is two counters: the account's `held` (the same conditional UPDATE as the real ledger) and this owner's
// total held on that account (`owner_holds`, one row per gateway instance and account, which a sweep would release if
// the instance died). The hold's details stay in memory until the request closes; the capture (or release) then
// inserts the request's one row (hold, charge and usage columns together), all its postings (the hold's pair dated at
// admission) and the counters' updates. Not a valid ledger for production: no sweep of a dead owner's counters, no
// expiry of a live owner's holds, no recovery of the in-memory holds, usage readers not moved. See
// docs/ledger-written-once.md. Same export as dist/store/sqlite-ledger-ops.js, so that bench/shapes/hook.mjs can put
// it in a gateway's place.
import { toAccount } from '../../dist/store/accounts.js'
import { refusalOf, usageValues, USAGE_COLUMNS } from '../../dist/store/ledger-types.js'

const USAGE_ON_HOLD = ['served_model text', 'provider text', 'stream integer', 'prompt_tokens integer', 'completion_tokens integer',
  'upstream_prompt_tokens integer', 'upstream_completion_tokens integer', 'outcome text', 'latency_ms integer']

/** Adds what the prototype writes to a migrated store: the owners' counters, usage columns on holds and their index. */
export function addPrototypeSchema(raw) {
  if (raw.prepare(`SELECT 1 FROM sqlite_schema WHERE name = 'owner_holds'`).get()) return
  raw.transaction(() => {
    raw.exec(`CREATE TABLE owner_holds (owner text NOT NULL, account_id integer NOT NULL REFERENCES accounts(id), held integer NOT NULL,
      PRIMARY KEY (owner, account_id)) WITHOUT ROWID`)
    for (const column of USAGE_ON_HOLD) raw.exec(`ALTER TABLE holds ADD COLUMN ${column}`)
    raw.exec('CREATE INDEX holds_account_time ON holds (account_id, created_at)')
  }).immediate()
}

export function sqliteLedgerOps(raw) {
  addPrototypeSchema(raw)
  const p = (sql) => raw.prepare(sql)
  const s = {
    hold: p(`UPDATE accounts SET held = held + ? WHERE id = ? AND status = 'active' AND debt = 0 AND balance - held >= ? AND cap - held >= ?`),
    account: p('SELECT * FROM accounts WHERE id = ?'),
    owned: p(`INSERT INTO owner_holds (owner, account_id, held) VALUES (?, ?, ?) ON CONFLICT (owner, account_id) DO UPDATE SET held = held + excluded.held`),
    unowned: p(`UPDATE owner_holds SET held = held - ? WHERE owner = ? AND account_id = ? AND held >= ?`),
    captureAccount: p('UPDATE accounts SET balance = balance - ?, held = held - ?, cap = CASE WHEN cap > ? THEN cap - ? ELSE 0 END WHERE id = ?'),
    closed: p(`INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at, closed_at, cost, payee_id, fee,
      served_model, provider, stream, prompt_tokens, completion_tokens, upstream_prompt_tokens, upstream_completion_tokens, outcome, latency_ms)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    // The hold's pair (dated at admission) and the close's postings; zero amounts are postings not made.
    postings: p(`INSERT INTO postings (ref, account_id, book, kind, amount, created_at)
      SELECT ?, column1, column2, column3, column4, column5 FROM (VALUES
        (?, 'held', 'hold', ?, ?), (?, 'available', 'hold', ?, ?), (?, 'held', 'release', ?, ?), (?, 'available', 'release', ?, ?),
        (?, 'held', 'capture', ?, ?), (?, 'pending', 'payout', ?, ?), (?, 'pending', 'fee', ?, ?)
      ) WHERE column4 <> 0`),
    usage: p(`INSERT OR IGNORE INTO usage (${USAGE_COLUMNS}) VALUES (${USAGE_COLUMNS.split(',').map(() => '?').join(', ')})`),
  }
  /** Holds committed and not closed, by request id. */
  const open = new Map()

  const close = (h, status, cost, payeeId, fee, feeAccountId, now, u) => {
    if (s.unowned.run(h.amount, h.owner, h.accountId, h.amount).changes === 0) return false
    const rest = h.amount - cost
    s.captureAccount.run(cost, h.amount, cost, cost, h.accountId)
    s.closed.run(h.requestId, h.accountId, h.keyId, h.model, h.amount, status, h.owner, h.now, h.expiresAt, now, cost, payeeId, fee,
      u.servedModel, u.provider, u.stream ? 1 : 0, u.promptTokens, u.completionTokens, u.upstreamPromptTokens, u.upstreamCompletionTokens, u.outcome, u.latencyMs)
    s.postings.run(h.requestId, h.accountId, h.amount, h.now, h.accountId, -h.amount, h.now, h.accountId, -rest, now, h.accountId, rest, now,
      h.accountId, -cost, now, payeeId, cost - fee, now, feeAccountId, fee, now)
    return true
  }
  // Map changes wait for the commit: a group rolled back must leave the open holds as they were.
  let staged = []
  const run = (op) => {
    switch (op.kind) {
      case 'hold': {
        const h = op.hold
        if (s.hold.run(h.amount, h.accountId, h.amount, h.amount).changes === 0) {
          const row = s.account.get(h.accountId)
          return refusalOf(row && toAccount(row))
        }
        s.owned.run(h.owner, h.accountId, h.amount)
        staged.push(() => open.set(h.requestId, h))
        return { ok: true }
      }
      case 'capture': {
        const c = op.capture
        const h = open.get(c.requestId)
        if (!h || !close(h, 'captured', c.cost, c.payeeId, c.fee, c.feeAccountId, c.now, c.usage)) return false
        staged.push(() => open.delete(c.requestId))
        return true
      }
      case 'release': {
        const h = open.get(op.requestId)
        if (!h || !close(h, 'released', 0n, null, 0n, null, op.now, op.usage)) {
          s.usage.run(...usageValues(op.usage))
          return false
        }
        staged.push(() => open.delete(op.requestId))
        return true
      }
      case 'record': return void s.usage.run(...usageValues(op.usage))
    }
  }
  const group = raw.transaction((ops) => ops.map(run))
  return {
    runGroup(ops) {
      staged = []
      try {
        const values = group.immediate(ops)
        staged.forEach((apply) => apply())
        return values.map((value) => ({ ok: true, value }))
      } catch (error) {
        // Locked by another process (SQLITE_BUSY) or a bug: every operation fails, having done nothing.
        return ops.map(() => ({ ok: false, error }))
      }
    },
  }
}
