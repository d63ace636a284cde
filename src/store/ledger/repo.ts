import { sql, type Kysely, type SelectQueryBuilder } from 'kysely'
import type { Database } from '../schema.js'
import type { StoreDialect } from '../dialect.js'
import { big, num } from '../ints.js'
import { auditIn, openHoldsIn, type LedgerAudit } from './audit.js'
import type { Outcome, UsageRecord } from '../usage.js'
import type { CaptureRequest, CommitObserver, HoldRequest, HoldResult, HotLedger } from './types.js'
import { MAX_STORED } from '../chain.js'
import { lowerCounter, NOTHING_LEFT } from './lower-counter.js'

export type { CaptureRequest, HoldRequest, HoldResult } from './types.js'

export type { LedgerAudit } from './audit.js'

type OpenHolds = SelectQueryBuilder<
  Database,
  'holds',
  { request_id: string; account_id: number | bigint; key_id: string; model: string; created_at: number | bigint }
>

/**
 * Money movements of requests. Each is one transaction whose first statement is a conditional write,
 * so concurrent requests, processes and sweepers can never spend a unit twice or close a hold twice.
 * The per-request writes go through the dialect's HotLedger; sweeps and audits are plain Kysely.
 */
export class LedgerRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly hot: HotLedger,
    private readonly dialect: StoreDialect,
  ) {}

  /** `observer` is told of each commit of the per-request writes (metrics). */
  observeCommits(observer: CommitObserver): void {
    this.hot.onCommit = observer
  }

  /** Admission: holds `amount` when spendable covers it (one atomic conditional write). */
  hold(h: HoldRequest): Promise<HoldResult> {
    // A negative hold would free what others hold; one past the store's integers cannot be bound. Refused before any
    // dialect, like a capture that is not a charge (admission never asks for either).
    if (h.amount < 0n || h.amount > MAX_STORED)
      return Promise.reject(new Error(`a hold of ${h.amount} on ${h.requestId} is not an amount`))
    return this.hot.hold(h)
  }

  /**
   * Captures the cost of a finished request, releases the rest, credits payee and fee, records usage. Once only;
   * resolves once durable.
   */
  capture(c: CaptureRequest): Promise<boolean> {
    // Checked here, once, before any dialect: a bad amount must not reach (and roll back) a group of other requests.
    if (c.cost < 0n || c.fee < 0n || c.fee > c.cost)
      return Promise.reject(new Error(`capture of ${c.cost} with fee ${c.fee} on ${c.requestId} is not a charge`))
    return this.hot.capture(c)
  }

  /** Releases a request's whole hold (nothing charged) and records its usage. False when already closed. */
  release(requestId: string, now: number, usage: UsageRecord): Promise<boolean> {
    return this.hot.release(requestId, now, usage)
  }

  /** Records the usage of a request refused before any money moved. */
  record(usage: UsageRecord): Promise<void> {
    return this.hot.record(usage)
  }

  /**
   * Releases the holds past their expiry: this instance's own (requests it no longer serves: their release failed),
   * and rows left open by an older version; then recounts the counters holds whose answer was lost left in doubt.
   */
  async releaseExpired(now: number): Promise<number> {
    const own = await Promise.all(
      this.hot.open.expired(now).map((h) => this.hot.release(h.requestId, now, sweptUsage(h, now, 'expired'))),
    )
    const rows = await this.sweepRows(now, 'expired', (q) => q.where('expires_at', '<', BigInt(now)))
    // After the expired holds: their releases resolve closes in doubt, which a recount waits for.
    const lost = await this.hot.resolveDoubts((c) =>
      lowerCounter(this.db, this.dialect, { ...c, dead: false }, () => this.hot.open.counted(c.owner, c.accountId)),
    )
    return own.filter(Boolean).length + rows + lost
  }

  /**
   * Releases the open holds of gateway instances that are gone: their counters, each account's in one transaction that
   * marks the counter dead (that instance can never hold on it again, and its closes find nothing held), and rows left
   * open by an older version. Their requests leave no record: no postings were written for their holds.
   */
  async releaseOwnedBy(owners: string[], now: number): Promise<number> {
    if (owners.length === 0) return 0
    const counters = await this.db
      .selectFrom('owner_holds')
      .select(['owner', 'account_id'])
      .where('owner', 'in', owners)
      .where('dead', '=', 0)
      .orderBy('account_id')
      .execute()
    let released = 0
    for (const c of counters)
      released += await lowerCounter(
        this.db,
        this.dialect,
        { owner: c.owner, accountId: num(c.account_id), dead: true },
        () => NOTHING_LEFT,
      )
    return released + (await this.sweepRows(now, 'abandoned', (q) => q.where('owner', 'in', owners)))
  }

  /**
   * Releases the holds of owners no longer registered: an instance that stopped with a hold left open (its close
   * failed), or one removed by a sweep that did not get to release its holds. One statement reads both the counters
   * and the instances, and an instance registers before it holds, so a live instance's counter is never taken.
   */
  async releaseUnregistered(now: number): Promise<number> {
    const registered = this.db.selectFrom('instances').select('id')
    const counted = await this.db
      .selectFrom('owner_holds')
      .select('owner')
      .distinct()
      .where('dead', '=', 0)
      .where('owner', 'not in', registered)
      .execute()
    const rows = await this.db
      .selectFrom('holds')
      .select('owner')
      .distinct()
      .where('status', '=', sql.lit('open'))
      .where('owner', 'not in', registered)
      .execute()
    return this.releaseOwnedBy([...new Set([...counted, ...rows].map((r) => r.owner))], now)
  }

  /**
   * An instance that stops: releases what it still holds (holds whose close failed) and marks its counters dead, kept
   * until this store's ledger has closed (`forgetRetired`). A hold committed meanwhile (a request in flight as the
   * server closed) stays: its close, or else a sweep of unregistered owners, releases it (docs/architecture.md §15.27).
   */
  async retire(owner: string, now: number): Promise<number> {
    this.retired.add(owner)
    return this.releaseOwnedBy([owner], now)
  }

  private readonly retired = new Set<string>()

  /**
   * Deletes the dead counters of the instances retired through this store, once it can no longer hold or close for
   * them (its ledger has closed): `owner_holds` then keeps only the rows of live instances and of those that died.
   */
  async forgetRetired(): Promise<void> {
    if (this.retired.size === 0) return
    await this.db
      .deleteFrom('owner_holds')
      .where('owner', 'in', [...this.retired])
      .where('dead', '=', 1)
      .execute()
    this.retired.clear()
  }

  /**
   * Releases the open rows (holds of an older version) a sweep picks, through the same conditional release as a
   * request's own, recording an empty usage: a hold released between the read and the release is left alone.
   */
  private async sweepRows(now: number, outcome: Outcome, pick: (q: OpenHolds) => OpenHolds): Promise<number> {
    const holds = await pick(
      this.db
        .selectFrom('holds')
        .select(['request_id', 'account_id', 'key_id', 'model', 'created_at'])
        .where('status', '=', sql.lit('open')),
    ).execute()
    const released = await Promise.all(
      holds.map((h) => {
        const row = {
          requestId: h.request_id,
          accountId: num(h.account_id),
          keyId: h.key_id,
          model: h.model,
          now: num(h.created_at),
        }
        return this.hot.release(h.request_id, now, sweptUsage(row, now, outcome))
      }),
    )
    return released.filter(Boolean).length
  }

  /**
   * Extends the leases of the holds of requests this instance is serving. Its other open holds (a request whose
   * release failed) expire, and `releaseExpired` releases them.
   */
  async extendLeases(requestIds: Iterable<string>, expiresAt: number): Promise<void> {
    this.hot.open.extend(requestIds, expiresAt)
  }

  /** When this instance's open hold of the request expires, unless its lease is extended first. */
  leaseOf(requestId: string): number | undefined {
    return this.hot.open.get(requestId)?.expiresAt
  }

  /** The live instances' open holds and what they hold, now. */
  async heldNow(): Promise<{ open: number; held: bigint }> {
    const r = await this.db
      .selectFrom('owner_holds')
      .select([sql<bigint>`coalesce(sum(open), 0)`.as('open'), sql<bigint>`coalesce(sum(held), 0)`.as('held')])
      .where('dead', '=', 0)
      .executeTakeFirstOrThrow()
    return { open: num(r.open), held: big(r.held) }
  }

  /** Open holds in the store: the live instances' counted holds, and rows left open by an older version. */
  async openHolds(accountId?: number): Promise<number> {
    return openHoldsIn(this.db, accountId)
  }

  /**
   * Checks the ledger's invariants: every ref nets to zero; cached balances equal their postings and are not negative.
   * Its reads see one state of the store (a read-only transaction: repeatable read on Postgres, a WAL snapshot on
   * SQLite, where this process's hot ledger waits for it), so requests closing beside it cannot show as a mismatch.
   */
  async audit(): Promise<LedgerAudit> {
    return this.dialect.readOnlySnapshot(this.db).execute((trx) => auditIn(trx))
  }
}

/** The usage of a hold released by a sweep: nothing served, nothing charged. */
function sweptUsage(
  h: Pick<HoldRequest, 'requestId' | 'accountId' | 'keyId' | 'model' | 'now'>,
  now: number,
  outcome: Outcome,
): UsageRecord {
  return {
    requestId: h.requestId,
    accountId: h.accountId,
    keyId: h.keyId,
    model: h.model,
    servedModel: null,
    provider: null,
    stream: false,
    promptTokens: 0,
    completionTokens: 0,
    upstreamPromptTokens: null,
    upstreamCompletionTokens: null,
    cost: 0n,
    outcome,
    latencyMs: now - h.now,
    createdAt: h.now,
  }
}
