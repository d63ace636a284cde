import type pg from 'pg'
import { toAccount } from './accounts.js'
import { big } from './dialect.js'
import type { UsageRecord } from './usage.js'
import { overCapture, refusalOf, usageValues, USAGE_COLUMNS, type CaptureRequest, type HoldRequest, type HoldResult, type HotLedger } from './ledger-types.js'

/**
 * The hot ledger on Postgres: each operation is ONE statement of data-modifying CTEs, prepared once per
 * connection. The account row is locked for a single round trip, so one busy account does not serialize on
 * client latency; the conditional UPDATE re-checks its WHERE after the lock, which makes admission atomic.
 */
const HOLD = `
WITH acct AS (
  UPDATE accounts SET held = held + $5::bigint
  WHERE id = $2::bigint AND status = 'active' AND debt = 0 AND balance - held >= $5::bigint AND cap - held >= $5::bigint
  RETURNING id
), h AS (
  INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at)
  SELECT $1::text, id, $3::text, $4::text, $5::bigint, 'open', $6::text, $7::bigint, $8::bigint FROM acct
), p AS (
  INSERT INTO postings (ref, account_id, book, kind, amount, created_at)
  SELECT $1::text, acct.id, v.book, 'hold', v.amount, $7::bigint
  FROM acct CROSS JOIN (VALUES ('held', $5::bigint), ('available', -$5::bigint)) AS v(book, amount)
)
SELECT count(*)::int AS ok FROM acct`

const USAGE_PARAMS = (from: number) => Array.from({ length: 15 }, (_, i) => `$${from + i}`).join(', ')

const CAPTURE = `
WITH h AS (
  UPDATE holds SET status = 'captured', cost = $2::bigint, payee_id = $3::bigint, fee = $4::bigint, closed_at = $5::bigint
  WHERE request_id = $1::text AND status = 'open' AND amount >= $2::bigint
  RETURNING account_id, amount
), a AS (
  UPDATE accounts SET balance = balance - $2::bigint, held = accounts.held - h.amount,
    cap = CASE WHEN cap > $2::bigint THEN cap - $2::bigint ELSE 0 END
  FROM h WHERE accounts.id = h.account_id
  RETURNING accounts.id
), p AS (
  INSERT INTO postings (ref, account_id, book, kind, amount, created_at)
  SELECT $1::text, v.account_id, v.book, v.kind, v.amount, $5::bigint
  FROM h CROSS JOIN LATERAL (VALUES
    (h.account_id, 'held', 'release', $2::bigint - h.amount),
    (h.account_id, 'available', 'release', h.amount - $2::bigint),
    (h.account_id, 'held', 'capture', -$2::bigint),
    ($3::bigint, 'pending', 'payout', $2::bigint - $4::bigint),
    ($6::bigint, 'pending', 'fee', $4::bigint)
  ) AS v(account_id, book, kind, amount)
  WHERE v.amount <> 0
), u AS (
  INSERT INTO usage (${USAGE_COLUMNS}) SELECT ${USAGE_PARAMS(7)} FROM h
  ON CONFLICT (request_id) DO NOTHING
)
SELECT count(*)::int AS ok FROM h`

const RELEASE = `
WITH h AS (
  UPDATE holds SET status = 'released', closed_at = $2::bigint WHERE request_id = $1::text AND status = 'open'
  RETURNING account_id, amount
), a AS (
  UPDATE accounts SET held = accounts.held - h.amount FROM h WHERE accounts.id = h.account_id RETURNING accounts.id
), p AS (
  INSERT INTO postings (ref, account_id, book, kind, amount, created_at)
  SELECT $1::text, h.account_id, v.book, 'release', v.sign * h.amount, $2::bigint
  FROM h CROSS JOIN (VALUES ('held', -1), ('available', 1)) AS v(book, sign)
), u AS (
  INSERT INTO usage (${USAGE_COLUMNS}) VALUES (${USAGE_PARAMS(3)})
  ON CONFLICT (request_id) DO NOTHING
)
SELECT count(*)::int AS ok FROM h`

const RECORD = `INSERT INTO usage (${USAGE_COLUMNS}) VALUES (${USAGE_PARAMS(1)}) ON CONFLICT (request_id) DO NOTHING`

type Values = unknown[]

export class PostgresHotLedger implements HotLedger {
  constructor(private readonly pool: pg.Pool) {}

  private async one(name: string, text: string, values: Values): Promise<boolean> {
    const r = await this.pool.query<{ ok: number }>({ name, text, values: values.map(param) })
    return (r.rows[0]?.ok ?? 0) > 0
  }

  async hold(h: HoldRequest): Promise<HoldResult> {
    const ok = await this.one('svc_hold', HOLD, [h.requestId, h.accountId, h.keyId, h.model, h.amount, h.owner, h.now, h.expiresAt])
    if (ok) return { ok: true }
    const r = await this.pool.query('SELECT * FROM accounts WHERE id = $1', [h.accountId])
    return refusalOf(r.rows[0] && toAccount(r.rows[0]))
  }

  async capture(c: CaptureRequest): Promise<boolean> {
    const ok = await this.one('svc_capture', CAPTURE, [c.requestId, c.cost, c.payeeId, c.fee, c.now, c.feeAccountId, ...usageValues(c.usage)])
    if (ok) return true
    const r = await this.pool.query<{ amount: string | bigint }>(`SELECT amount FROM holds WHERE request_id = $1 AND status = 'open'`, [c.requestId])
    if (r.rows[0]) throw overCapture(c.requestId, c.cost, big(r.rows[0].amount))
    return false
  }

  release(requestId: string, now: number, usage: UsageRecord): Promise<boolean> {
    return this.one('svc_release', RELEASE, [requestId, now, ...usageValues(usage)])
  }

  async record(usage: UsageRecord): Promise<void> {
    await this.pool.query({ name: 'svc_record', text: RECORD, values: usageValues(usage).map(param) })
  }

  /** Each operation is one statement its caller awaits: nothing is queued here, and the pool ends what runs. */
  async close(): Promise<void> {}
}

function param(v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v
}
