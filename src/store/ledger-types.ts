import type { Account } from './accounts.js'
import { usageRow, type UsageRecord } from './usage.js'

export interface HoldRequest {
  requestId: string
  accountId: number
  keyId: string
  model: string
  amount: bigint
  owner: string
  now: number
  expiresAt: number
}

export type HoldResult = { ok: true } | { ok: false; reason: 'insufficient' | 'suspended' | 'in_debt' | 'missing'; account?: Account }

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
 * The three money writes on every request's path, each one transaction whose first statement is a conditional
 * write: concurrent requests, processes and sweepers can never spend a unit twice or close a hold twice.
 * Each dialect implements them as fast as it can (prepared statements / one statement per call).
 */
export interface HotLedger {
  /** Admission: holds `amount` when spendable covers it. */
  hold(h: HoldRequest): Promise<HoldResult>
  /**
   * Captures the cost, releases the rest, credits payee and fee, records usage. False when the hold was already
   * closed. Resolves only once the capture is durable: a reply may then tell the client it was charged.
   */
  capture(c: CaptureRequest): Promise<boolean>
  /** Releases the whole hold (nothing charged) and records usage. False when already closed. */
  release(requestId: string, now: number, usage: UsageRecord): Promise<boolean>
  /** Records the usage of a request that moved no money (refused before admission), with the same writes as the rest. */
  record(usage: UsageRecord): Promise<void>
  /**
   * Resolves once no operation is waiting (those queued meanwhile included: callers stop first) and the ledger let go
   * of what it holds; the store closes after it.
   */
  close(): Promise<void>
}

export function refusalOf(account: Account | undefined): HoldResult {
  if (!account) return { ok: false, reason: 'missing' }
  const reason = account.status !== 'active' ? 'suspended' : account.debt > 0n ? 'in_debt' : 'insufficient'
  return { ok: false, reason, account }
}

export function overCapture(requestId: string, cost: bigint, amount: bigint): Error {
  return new Error(`capture of ${cost} exceeds hold ${amount} on ${requestId}`)
}

/** Usage columns in the order of `usageRow`, for the dialects' raw statements. */
export const USAGE_COLUMNS = Object.keys(usageRow({ createdAt: 0 } as UsageRecord)).join(', ')

/** Usage values in USAGE_COLUMNS order: the one mapping of a record to a row is `usageRow`. */
export function usageValues(u: UsageRecord): unknown[] {
  return Object.values(usageRow(u))
}
