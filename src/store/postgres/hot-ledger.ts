import pg from 'pg'
import type { RateAnswer, RateTake } from '../../limits/counter.js'
import { toAccount } from '../accounts.js'
import { usageRow, type UsageRecord } from '../usage.js'
import { USAGE_ON_HOLDS } from '../migrations/009_records_written_once.js'
import { OpenHolds } from '../ledger/open-holds.js'
import { Recount } from './doubts.js'
import { closeKeyCtes, closeKeyValues, holdCountingKey } from './key-spend.js'
import { LedgerGroups, type Closed } from './ledger-ops.js'
import { KEY_SPEND_ROW, toKeySpend } from '../ledger/key-spend.js'
import {
  CloseUnanswered,
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
  type CommitObserver,
  type Close,
  type Counter,
  type HoldRequest,
  type HoldResult,
  type HotLedger,
} from '../ledger/types.js'

/**
 * The hot ledger on Postgres: each operation is ONE statement of data-modifying CTEs, a request's row written once, at
 * close. Every statement locks the account row before the counter row, as the sweeps do, so they cannot deadlock; a
 * hold whose answer was lost is recounted by the next sweep (`Recount`). docs/architecture.md §15.17.
 */
const HOLD = `
WITH acct AS (
  UPDATE accounts SET held = held + $3::bigint
  WHERE id = $2::bigint AND status = 'active' AND debt = 0 AND balance - held >= $3::bigint AND cap - held >= $3::bigint
  RETURNING id
), o AS (
  INSERT INTO owner_holds (owner, account_id, held, open) SELECT $1::text, id, $3::bigint, 1 FROM acct
  ON CONFLICT (owner, account_id) DO UPDATE SET held = owner_holds.held + excluded.held, open = owner_holds.open + 1
)
SELECT count(*)::int AS ok FROM acct`

const RECORD_PARAMS = (from: number) => RECORD_COLUMN_LIST.map((_, i) => `$${from + i}`).join(', ')

/**
 * $1 owner, $2 account, $3 amount held, $4 cost, then the row (RECORD_COLUMNS from $5), which stands for the request's
 * postings too (the `postings` view derives them, migration 010). Nothing is written when a sweep released the hold
 * first.
 */
const closeSql = (keyCtes = '') => `
WITH lk AS (
  SELECT id FROM accounts WHERE id = $2::bigint FOR NO KEY UPDATE
), o AS (
  UPDATE owner_holds SET held = held - $3::bigint, open = open - 1 FROM lk
  WHERE owner = $1::text AND account_id = lk.id AND held >= $3::bigint AND open > 0
  RETURNING account_id
), a AS (
  UPDATE accounts SET balance = balance - $4::bigint, held = accounts.held - $3::bigint,
    cap = CASE WHEN cap > $4::bigint THEN cap - $4::bigint ELSE 0 END
  FROM o WHERE accounts.id = o.account_id
), r AS (
  INSERT INTO holds (${RECORD_COLUMNS}) SELECT ${RECORD_PARAMS(5)} FROM o
)${keyCtes}
SELECT count(*)::int AS ok FROM o`

const CLOSE = closeSql()
/** The close of a hold its key's spend limit counted: the key's CTEs' parameters follow the row's. */
const CLOSE_KEY = closeSql(closeKeyCtes(5 + RECORD_COLUMN_LIST.length))

/** A hold of an older version, still a row: released by the sweeps. $1 request, $2 now, then the usage columns. */
const RELEASE_ROW = `
WITH h AS (
  UPDATE holds SET status = 'released', closed_at = $2::bigint, cost = 0, ${USAGE_ON_HOLDS.map((c, i) => `${c} = $${i + 3}`).join(', ')}
  WHERE request_id = $1::text AND status = 'open'
  RETURNING account_id, amount
), a AS (
  UPDATE accounts SET held = accounts.held - h.amount FROM h WHERE accounts.id = h.account_id RETURNING accounts.id
), p AS (
  INSERT INTO posting_rows (ref, account_id, book, kind, amount, created_at)
  SELECT $1::text, h.account_id, v.book, 'release', v.sign * h.amount, $2::bigint
  FROM h CROSS JOIN (VALUES ('held', -1), ('available', 1)) AS v(book, sign)
)
SELECT count(*)::int AS ok FROM h`

const RECORD = `INSERT INTO holds (${RECORD_COLUMNS}) VALUES (${RECORD_PARAMS(1)}) ON CONFLICT (request_id) DO NOTHING`

type Values = unknown[]

const UNIQUE_VIOLATION = '23505'

export class PostgresHotLedger implements HotLedger {
  readonly open = new OpenHolds()
  private readonly doubts = new Recount()

  private readonly groups: LedgerGroups

  /**
   * `takeRate`: a hold's rate take, counted in `key_rates` by its conditional upsert, a statement of its own before the
   * hold's (the group's statement holds no rates).
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly takeRate: (keyId: string, take: RateTake) => Promise<RateAnswer>,
  ) {
    const singles = {
      hold: (h: HoldRequest) => this.one('svc_hold', HOLD, [h.owner, h.accountId, h.amount]),
      close: (h: HoldRequest, c: Close) => this.closeOne(h, c),
    }
    this.groups = new LedgerGroups(pool, singles, (ops, ms) => this.onCommit(ops, ms))
  }

  onCommit: CommitObserver = () => {}

  /** One statement, its own transaction: a commit of one operation. */
  private async commit<R extends pg.QueryResultRow>(name: string, text: string, values: Values) {
    const startedAt = performance.now()
    const r = await this.pool.query<R>({ name, text, values: values.map(param) })
    this.onCommit(1, performance.now() - startedAt)
    return r
  }

  private async one(name: string, text: string, values: Values): Promise<boolean> {
    const r = await this.commit<{ ok: number }>(name, text, values)
    return (r.rows[0]?.ok ?? 0) > 0
  }

  async hold(h: HoldRequest): Promise<HoldResult> {
    if (!h.rate) return this.holdOnly(h)
    // Counted first, and counted even when the account then refuses the hold (as on SQLite).
    const rate = await this.takeRate(h.keyId, h.rate)
    if (!rate.taken) return { ok: false, reason: 'rate_limit', rate: rate.count }
    return { ...(await this.holdOnly(h)), rate: rate.count }
  }

  private async holdOnly(h: HoldRequest): Promise<HoldResult> {
    let by: 'held' | 'account' | 'key'
    try {
      by = await this.doubts.on(h, async () => {
        const r = h.spendReset
          ? await this.groups.settled(this.holdCountingKey(h))
          : (await this.groups.hold(h)) || 'account'
        if (r === true) this.open.add(h)
        return r === true ? 'held' : r
      })
    } catch (err) {
      // It may have committed, its answer lost: the counter is recounted at the next sweep (`Recount`).
      this.doubts.holdFailed(h)
      throw err
    }
    if (by === 'held') return { ok: true }
    if (by === 'key') {
      const k = await this.pool.query(`${KEY_SPEND_ROW} WHERE id = $1`, [h.keyId])
      if (k.rows[0]) return { ok: false, reason: 'key_limit', key: toKeySpend(k.rows[0]) }
    }
    const r = await this.pool.query('SELECT * FROM accounts WHERE id = $1', [h.accountId])
    return refusalOf(r.rows[0] && toAccount(r.rows[0]))
  }

  /**
   * A hold of a key with a spend limit: its own transaction, committed only when the key admits it too. True when
   * held, else what refused it.
   */
  private async holdCountingKey(h: HoldRequest): Promise<true | 'account' | 'key'> {
    const startedAt = performance.now()
    const r = await holdCountingKey(this.pool, h, param)
    this.onCommit(1, performance.now() - startedAt)
    return r.ok || (r.account ? 'key' : 'account')
  }

  /**
   * Closes an open hold of this instance, once (it leaves `open` before its statement runs); false when a sweep
   * released it first. A failed close goes back to `open` unless the request's row exists: then it committed, and the
   * row's key keeps a later close from counting the hold out twice.
   */
  private closeHold(h: HoldRequest, c: Close): Promise<boolean> {
    return this.doubts.on(h, async () => {
      // Another close of the request may have gone first while this one waited for a recount of the counter.
      if (!this.open.get(h.requestId)) return false
      this.open.remove(h.requestId)
      try {
        // A close of a key-limited hold moves its key's counters too: its own statement.
        const r = h.spendReset ? await this.groups.settled(this.closeOne(h, c)) : await this.groups.close(h, c)
        this.doubts.closeFailed(h, h.requestId, false)
        return r === 1
      } catch (err) {
        this.open.add(h)
        this.doubts.closeFailed(h, h.requestId)
        // The server's own refusal of the statement is an answer: it did not commit. Anything else (the connection
        // broke) leaves it unknown.
        throw err instanceof pg.DatabaseError ? err : new CloseUnanswered(h.requestId, err)
      }
    })
  }

  /** A close in its own statement; the request's row already there (an earlier close committed) is -1. */
  private async closeOne(h: HoldRequest, c: Close): Promise<Closed> {
    const values = [h.owner, h.accountId, h.amount, c.cost, ...recordValues(h, c)]
    try {
      const closed = h.spendReset
        ? await this.one('svc_close_key', CLOSE_KEY, [...values, ...closeKeyValues(h, c.closedAt, c.cost)])
        : await this.one('svc_close', CLOSE, values)
      if (closed) return 1
      await this.commit('svc_record', RECORD, recordValues(h, sweptClose(c)))
      return 0
    } catch (err) {
      if ((err as { code?: string }).code === UNIQUE_VIOLATION) return -1
      throw err
    }
  }

  async capture(c: CaptureRequest): Promise<boolean> {
    const h = this.open.get(c.requestId)
    if (!h) return false
    if (c.cost > h.amount) throw overCapture(c.requestId, c.cost, h.amount)
    return this.closeHold(h, capturedClose(c))
  }

  async release(requestId: string, now: number, usage: UsageRecord): Promise<boolean> {
    const h = this.open.get(requestId)
    if (h) return this.closeHold(h, releasedClose(now, usage))
    const u = usageRow(usage)
    if (await this.one('svc_release_row', RELEASE_ROW, [requestId, now, ...USAGE_ON_HOLDS.map((c) => u[c])]))
      return true
    // No hold to release (the request failed before it, or closed already): its usage, unless it has a row.
    await this.record(usage)
    return false
  }

  async record(usage: UsageRecord): Promise<void> {
    await this.commit('svc_record', RECORD, refusedValues(usage))
  }

  /**
   * Recounts, through `recount`, the counters a failed hold left in doubt (`Recount`); how many lost holds they had
   * counted.
   */
  resolveDoubts(recount: (c: Counter) => Promise<number>): Promise<number> {
    return this.doubts.resolve(recount)
  }

  /** Resolves once every hold and close asked for was answered (callers stop first); the pool ends after it. */
  close(): Promise<void> {
    return this.groups.drained()
  }
}

function param(v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v
}
