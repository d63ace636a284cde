import { sql, type Kysely, type SelectQueryBuilder } from 'kysely'
import type { Database } from './schema.js'
import { big, num } from './dialect.js'
import type { Outcome, UsageRecord } from './usage.js'
import type { CaptureRequest, HoldRequest, HoldResult, HotLedger } from './ledger-types.js'

export type { CaptureRequest, HoldRequest, HoldResult } from './ledger-types.js'

export interface LedgerAudit {
  /** Refs whose postings do not sum to zero. */
  unbalanced: { ref: string; sum: bigint }[]
  /** Accounts whose cached balance or held differ from their postings, or that went negative. */
  inconsistent: { address: string; balance: bigint; held: bigint; postedBalance: bigint; postedHeld: bigint }[]
  openHolds: number
}

/** Request ids per lease extension: far below either dialect's limit on bound parameters. */
const LEASES_PER_STATEMENT = 500

type OpenHolds = SelectQueryBuilder<Database, 'holds', { request_id: string; account_id: number | bigint; key_id: string; model: string; created_at: number | bigint }>

/**
 * Money movements of requests. Each is one transaction whose first statement is a conditional write,
 * so concurrent requests, processes and sweepers can never spend a unit twice or close a hold twice.
 * The per-request writes go through the dialect's HotLedger; sweeps and audits are plain Kysely.
 */
export class LedgerRepo {
  constructor(private readonly db: Kysely<Database>, private readonly hot: HotLedger) {}

  /** Admission: holds `amount` when spendable covers it (one atomic conditional write). */
  hold(h: HoldRequest): Promise<HoldResult> {
    return this.hot.hold(h)
  }

  /** Captures the cost of a finished request, releases the rest, credits payee and fee, records usage. Once only; resolves once durable. */
  capture(c: CaptureRequest): Promise<boolean> {
    // Checked here, once, before any dialect: a bad amount must not reach (and roll back) a group of other requests.
    if (c.cost < 0n || c.fee < 0n || c.fee > c.cost) return Promise.reject(new Error(`capture of ${c.cost} with fee ${c.fee} on ${c.requestId} is not a charge`))
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

  /** Releases open holds past their expiry. */
  releaseExpired(now: number): Promise<number> {
    return this.sweep(now, 'expired', (q) => q.where('expires_at', '<', BigInt(now)))
  }

  /** Releases the open holds of gateway instances that are gone. */
  async releaseOwnedBy(owners: string[], now: number): Promise<number> {
    if (owners.length === 0) return 0
    return this.sweep(now, 'abandoned', (q) => q.where('owner', 'in', owners))
  }

  /**
   * Releases the open holds a sweep picks through the same conditional release as a request's own, recording an
   * empty usage row: a hold captured or released between the read and the release is left alone.
   */
  private async sweep(now: number, outcome: Outcome, pick: (q: OpenHolds) => OpenHolds): Promise<number> {
    const holds = await pick(this.db.selectFrom('holds').select(['request_id', 'account_id', 'key_id', 'model', 'created_at']).where('status', '=', sql.lit('open'))).execute()
    const released = await Promise.all(holds.map((h) => {
      const created = num(h.created_at)
      return this.hot.release(h.request_id, now, {
        requestId: h.request_id, accountId: num(h.account_id), keyId: h.key_id, model: h.model, servedModel: null, provider: null, stream: false,
        promptTokens: 0, completionTokens: 0, upstreamPromptTokens: null, upstreamCompletionTokens: null, cost: 0n,
        outcome, latencyMs: now - created, createdAt: created,
      })
    }))
    return released.filter(Boolean).length
  }

  /**
   * Extends the leases of the open holds of requests a live instance is serving. Its other open holds (a request
   * whose release failed) and a dead instance's expire.
   */
  async extendLeases(owner: string, requestIds: readonly string[], expiresAt: number): Promise<void> {
    for (let i = 0; i < requestIds.length; i += LEASES_PER_STATEMENT) {
      await this.db
        .updateTable('holds')
        .set({ expires_at: BigInt(expiresAt) })
        .where('request_id', 'in', requestIds.slice(i, i + LEASES_PER_STATEMENT))
        .where('owner', '=', owner)
        .where('status', '=', sql.lit('open'))
        .execute()
    }
  }

  async openHolds(accountId?: number): Promise<number> {
    let q = this.db.selectFrom('holds').select((eb) => eb.fn.countAll<number>().as('n')).where('status', '=', 'open')
    if (accountId !== undefined) q = q.where('account_id', '=', accountId)
    return num((await q.executeTakeFirstOrThrow()).n)
  }

  /** Checks the ledger's invariants: every ref nets to zero; cached balances equal their postings and are not negative. */
  async audit(): Promise<LedgerAudit> {
    const unbalanced = await this.db
      .selectFrom('postings')
      .select(['ref', (eb) => eb.fn.sum<bigint>('amount').as('sum')])
      .groupBy('ref')
      .having((eb) => eb.fn.sum('amount'), '<>', 0)
      .execute()
    // One pass over the postings (they are not indexed by account for the books an account row caches), then the
    // users' cached figures beside them.
    const posted = new Map<number, { balance: bigint; held: bigint }>()
    const sums = await this.db
      .selectFrom('postings')
      .select([
        'account_id',
        sql<bigint>`coalesce(sum(case when book in ('available','held') then amount else 0 end), 0)`.as('balance'),
        sql<bigint>`coalesce(sum(case when book = 'held' then amount else 0 end), 0)`.as('held'),
      ])
      .groupBy('account_id')
      .execute()
    for (const r of sums) posted.set(num(r.account_id), { balance: big(r.balance), held: big(r.held) })
    const users = await this.db.selectFrom('accounts').select(['id', 'address', 'balance', 'held']).where('kind', '=', 'user').execute()
    const inconsistent = users
      .map((r) => {
        const p = posted.get(num(r.id))
        return { address: r.address, balance: big(r.balance), held: big(r.held), postedBalance: p?.balance ?? 0n, postedHeld: p?.held ?? 0n }
      })
      .filter((r) => r.balance !== r.postedBalance || r.held !== r.postedHeld || r.balance < 0n || r.held < 0n)
    return { unbalanced: unbalanced.map((r) => ({ ref: r.ref, sum: big(r.sum) })), inconsistent, openHolds: await this.openHolds() }
  }
}
