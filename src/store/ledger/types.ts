import type { Account } from '../accounts.js'
import type { HoldsTable } from '../schema.js'
import { usageRow, type UsageRecord } from '../usage.js'
import type { OpenHolds } from './open-holds.js'
import type { HoldRequest } from './hold-request.js'

export type { HoldRequest } from './hold-request.js'
import type { LimitReset } from '../../limits/period.js'
import type { RateCount } from '../../limits/counter.js'

/** A key's spend limit and counters, as a refusal of its spend limit reads them. */
export interface KeySpend {
  limit: bigint | null
  reset: LimitReset
  periodStart: number
  periodSpent: bigint
  periodHeld: bigint
}

export type HoldResult = (
  | { ok: true }
  | { ok: false; reason: 'insufficient' | 'suspended' | 'in_debt' | 'missing'; account?: Account }
  | { ok: false; reason: 'key_limit'; key: KeySpend }
  | { ok: false; reason: 'rate_limit' }
) & {
  /** The key's counts in the take's minute after it, when the hold carried a `rate`. */
  rate?: RateCount
}

export interface CaptureRequest {
  requestId: string
  /** What the request cost; never more than its hold. */
  cost: bigint
  payeeId: number
  fee: bigint
  feeAccountId: number
  now: number
  usage: UsageRecord
}

/**
 * A counter of open holds: an instance's `owner_holds` row for an account (Postgres recounts one in doubt: `Recount`).
 */
export interface Counter {
  owner: string
  accountId: number
}

/** A commit of the hot ledger: its operations and how long it took (ms), from its first statement until durable. */
export type CommitObserver = (ops: number, ms: number) => void

/**
 * The three money writes on every request's path, each one transaction whose first statement is a conditional
 * write: concurrent requests, processes and sweepers can never spend a unit twice or close a hold twice.
 * Each dialect implements them as fast as it can (prepared statements / one statement per call).
 */
export interface HotLedger {
  /** This instance's holds not yet closed (in the store, only counted in `owner_holds`). */
  readonly open: OpenHolds
  /** Told of each commit: how many operations it carried and how long it took until durable. */
  onCommit: CommitObserver
  /** Admission: holds `amount` when spendable covers it. */
  hold(h: HoldRequest): Promise<HoldResult>
  /**
   * Captures the cost, releases the rest, credits payee and fee, records usage. False when the hold was already
   * closed. Resolves only once the capture is durable: a reply may then tell the client it was charged.
   */
  capture(c: CaptureRequest): Promise<boolean>
  /** Releases the whole hold (nothing charged) and records usage. False when already closed. */
  release(requestId: string, now: number, usage: UsageRecord): Promise<boolean>
  /**
   * Records the usage of a request that moved no money (refused before admission), with the same writes as the rest.
   */
  record(usage: UsageRecord): Promise<void>
  /**
   * Puts right, through `recount`, what holds whose answer was lost may have left counted (Postgres: `Recount`); how
   * many holds that was. Where a hold's outcome is always known (SQLite), none: 0.
   */
  resolveDoubts(recount: (c: Counter) => Promise<number>): Promise<number>
  /**
   * Resolves once no operation is waiting (those queued meanwhile included: callers stop first) and the ledger let go
   * of what it holds; the store closes after it.
   */
  close(): Promise<void>
}

/**
 * A close of a hold whose statement was sent but never answered (the connection broke): it may have committed. What the
 * store holds tells, once a release has settled it either way (`HotLedger.release` finds the hold closed only if it
 * was).
 */
export class CloseUnanswered extends Error {
  constructor(
    readonly requestId: string,
    cause: unknown,
  ) {
    super(
      `the store did not answer the close of ${requestId} (${cause instanceof Error ? cause.message : String(cause)})`,
      { cause },
    )
  }
}

export function refusalOf(account: Account | undefined): HoldResult {
  if (!account) return { ok: false, reason: 'missing' }
  const reason = account.status !== 'active' ? 'suspended' : account.debt > 0n ? 'in_debt' : 'insufficient'
  return { ok: false, reason, account }
}

export function overCapture(requestId: string, cost: bigint, amount: bigint): Error {
  return new Error(`capture of ${cost} exceeds hold ${amount} on ${requestId}`)
}

/** How a request's row in `holds` ends: the hold's columns, then the close's, then the usage's (RECORD_COLUMNS). */
export interface Close {
  status: 'captured' | 'released' | 'refused'
  cost: bigint
  payeeId: number | null
  fee: bigint | null
  /** The account the fee went to (when there is a fee). */
  feeAccountId: number | null
  closedAt: number
  usage: UsageRecord
  /** The row stands for the request's postings (`postings` derives them from it, migration 010). */
  posted: boolean
}

/** How a request closes that its capture charged. */
export function capturedClose(c: CaptureRequest): Close {
  return {
    status: 'captured',
    cost: c.cost,
    payeeId: c.payeeId,
    fee: c.fee,
    feeAccountId: c.feeAccountId,
    closedAt: c.now,
    usage: c.usage,
    posted: true,
  }
}

/** How a request closes whose hold was released whole: nothing charged. */
export function releasedClose(now: number, usage: UsageRecord): Close {
  return {
    status: 'released',
    cost: 0n,
    payeeId: null,
    fee: null,
    feeAccountId: null,
    closedAt: now,
    usage,
    posted: true,
  }
}

/**
 * How a request closes whose hold a sweep released first (it took this instance for dead): nothing charged and
 * nothing posted (the sweep posted nothing either: no postings were made for the hold), and its usage kept as
 * `abandoned`, with what was served.
 */
export function sweptClose(c: Close): Close {
  return {
    status: 'released',
    cost: 0n,
    payeeId: null,
    fee: null,
    feeAccountId: null,
    closedAt: c.closedAt,
    usage: { ...c.usage, cost: 0n, outcome: 'abandoned' },
    posted: false,
  }
}

/**
 * What a swept close changes in its request's row (`sweptClose`), by column: the Postgres group derives the swept row
 * from the close's row with these rather than being sent both.
 */
export const SWEPT_COLUMNS = {
  status: 'released',
  cost: '0',
  payee_id: null,
  fee: null,
  fee_account_id: null,
  outcome: 'abandoned',
  posted: 0,
} as const

/**
 * The columns of a request's one row in `holds` that its close writes, in the order of `recordValues`: names of the
 * schema's table (the compiler checks each), for the dialects' prepared statements.
 */
export const RECORD_COLUMN_LIST = [
  'request_id',
  'account_id',
  'key_id',
  'model',
  'amount',
  'status',
  'owner',
  'created_at',
  'expires_at',
  'closed_at',
  'cost',
  'payee_id',
  'fee',
  'served_model',
  'provider',
  'stream',
  'prompt_tokens',
  'completion_tokens',
  'upstream_prompt_tokens',
  'upstream_completion_tokens',
  'outcome',
  'latency_ms',
  'posted',
  'fee_account_id',
  'body_sha256',
  'input_price',
  'output_price',
] as const satisfies readonly (keyof HoldsTable)[]

export type RecordColumn = (typeof RECORD_COLUMN_LIST)[number]

/** RECORD_COLUMN_LIST as a statement names them. */
export const RECORD_COLUMNS = RECORD_COLUMN_LIST.join(', ')

/** A request's row, column by column: its hold (none for a refusal: amount 0, no owner) and how it closed. */
export function recordRow(h: HoldRequest | undefined, c: Close): Record<RecordColumn, unknown> {
  const u = usageRow(c.usage)
  return {
    request_id: h ? h.requestId : u.request_id,
    account_id: h ? h.accountId : u.account_id,
    key_id: h ? h.keyId : u.key_id,
    model: h ? h.model : u.model,
    amount: h ? h.amount : 0n,
    status: c.status,
    owner: h ? h.owner : '',
    created_at: h ? h.now : u.created_at,
    expires_at: h ? h.expiresAt : u.created_at,
    closed_at: c.closedAt,
    cost: c.cost,
    payee_id: c.payeeId,
    fee: c.fee,
    served_model: u.served_model,
    provider: u.provider,
    stream: u.stream,
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    upstream_prompt_tokens: u.upstream_prompt_tokens,
    upstream_completion_tokens: u.upstream_completion_tokens,
    outcome: u.outcome,
    latency_ms: u.latency_ms,
    posted: c.posted ? 1 : 0,
    fee_account_id: c.fee ? c.feeAccountId : null,
    body_sha256: c.usage.bodySha256 ?? null,
    input_price: c.usage.prices?.input ?? null,
    output_price: c.usage.prices?.output ?? null,
  }
}

/** A request's row as a prepared statement binds it: its values in the order of RECORD_COLUMN_LIST. */
export function recordValues(h: HoldRequest | undefined, c: Close): unknown[] {
  const row = recordRow(h, c)
  return RECORD_COLUMN_LIST.map((column) => row[column])
}

/** The row of a request that moved no money (refused before admission, or failed before its hold). */
export function refusedValues(usage: UsageRecord): unknown[] {
  return recordValues(undefined, {
    status: 'refused',
    cost: usage.cost,
    payeeId: null,
    fee: null,
    feeAccountId: null,
    closedAt: usage.createdAt + usage.latencyMs,
    usage,
    posted: false,
  })
}
