import { sql, type Insertable, type Kysely, type Transaction } from 'kysely'
import type { Database, PostingsTable } from './schema.js'
import { toAccount, type Account } from './accounts.js'
import { big, num } from './dialect.js'
import { usageRow, type Outcome, type UsageRecord } from './usage.js'

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

export interface LedgerAudit {
  /** Refs whose postings do not sum to zero. */
  unbalanced: { ref: string; sum: bigint }[]
  /** Accounts whose cached balance or held differ from their postings, or that went negative. */
  inconsistent: { address: string; balance: bigint; held: bigint; postedBalance: bigint; postedHeld: bigint }[]
  openHolds: number
}

type Posting = Omit<Insertable<PostingsTable>, 'created_at'>

/**
 * Money movements of requests. Each is one transaction whose first statement is a conditional write,
 * so concurrent requests, processes and sweepers can never spend a unit twice or close a hold twice.
 */
export class LedgerRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Admission: holds `amount` when spendable covers it (one atomic conditional update). */
  async hold(h: HoldRequest): Promise<HoldResult> {
    return this.db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('accounts')
        .set({ held: sql`held + ${h.amount}` })
        .where('id', '=', h.accountId)
        .where('status', '=', 'active')
        .where('debt', '=', 0n)
        .where(sql<boolean>`balance - held >= ${h.amount}`)
        .where(sql<boolean>`cap - held >= ${h.amount}`)
        .returning('id')
        .executeTakeFirst()
      if (!updated) {
        const row = await trx.selectFrom('accounts').selectAll().where('id', '=', h.accountId).executeTakeFirst()
        if (!row) return { ok: false, reason: 'missing' }
        const account = toAccount(row)
        const reason = account.status !== 'active' ? 'suspended' : account.debt > 0n ? 'in_debt' : 'insufficient'
        return { ok: false, reason, account }
      }
      const now = BigInt(h.now)
      await trx.insertInto('holds').values({
        request_id: h.requestId, account_id: h.accountId, key_id: h.keyId, model: h.model, amount: h.amount, status: 'open',
        owner: h.owner, created_at: now, expires_at: BigInt(h.expiresAt), closed_at: null, cost: null, payee_id: null, fee: null, batch_id: null,
      }).execute()
      await insertPostings(trx, h.now, [
        { ref: h.requestId, account_id: h.accountId, book: 'held', kind: 'hold', amount: h.amount },
        { ref: h.requestId, account_id: h.accountId, book: 'available', kind: 'hold', amount: -h.amount },
      ])
      return { ok: true }
    })
  }

  /** Captures the cost of a finished request, releases the rest, credits payee and fee, records usage. Once only. */
  async capture(c: CaptureRequest): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const hold = await trx
        .updateTable('holds')
        .set({ status: 'captured', cost: c.cost, payee_id: c.payeeId, fee: c.fee, closed_at: BigInt(c.now) })
        .where('request_id', '=', c.requestId)
        .where('status', '=', 'open')
        .returning(['account_id', 'amount'])
        .executeTakeFirst()
      if (!hold) return false
      const accountId = num(hold.account_id)
      const amount = big(hold.amount)
      if (c.cost > amount || c.fee > c.cost || c.cost < 0n) throw new Error(`capture of ${c.cost} exceeds hold ${amount} on ${c.requestId}`)
      await trx
        .updateTable('accounts')
        .set({
          balance: sql`balance - ${c.cost}`,
          held: sql`held - ${amount}`,
          cap: sql`case when cap > ${c.cost} then cap - ${c.cost} else 0 end`,
        })
        .where('id', '=', accountId)
        .execute()
      const ref = c.requestId
      const rest = amount - c.cost
      const postings: Posting[] = []
      if (rest > 0n) {
        postings.push({ ref, account_id: accountId, book: 'held', kind: 'release', amount: -rest })
        postings.push({ ref, account_id: accountId, book: 'available', kind: 'release', amount: rest })
      }
      if (c.cost > 0n) {
        postings.push({ ref, account_id: accountId, book: 'held', kind: 'capture', amount: -c.cost })
        postings.push({ ref, account_id: c.payeeId, book: 'pending', kind: 'payout', amount: c.cost - c.fee })
        if (c.fee > 0n) postings.push({ ref, account_id: c.feeAccountId, book: 'pending', kind: 'fee', amount: c.fee })
      }
      await insertPostings(trx, c.now, postings)
      await trx.insertInto('usage').values(usageRow(c.usage)).onConflict((oc) => oc.column('request_id').doNothing()).execute()
      return true
    })
  }

  /** Releases a request's whole hold (nothing charged) and records its usage. False when already closed. */
  async release(requestId: string, now: number, usage: UsageRecord): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const released = await releaseWhere(trx, now, { requestId })
      await trx.insertInto('usage').values(usageRow(usage)).onConflict((oc) => oc.column('request_id').doNothing()).execute()
      return released > 0
    })
  }

  /** Releases open holds past their expiry. */
  async releaseExpired(now: number): Promise<number> {
    return this.db.transaction().execute((trx) => releaseWhere(trx, now, { expiredBefore: now }, 'expired'))
  }

  /** Releases the open holds of gateway instances that are gone. */
  async releaseOwnedBy(owners: string[], now: number): Promise<number> {
    if (owners.length === 0) return 0
    return this.db.transaction().execute((trx) => releaseWhere(trx, now, { owners }, 'abandoned'))
  }

  /** Extends the leases of a live instance's open holds, so only holds of dead instances ever expire. */
  async extendLeases(owner: string, expiresAt: number): Promise<void> {
    await this.db.updateTable('holds').set({ expires_at: BigInt(expiresAt) }).where('owner', '=', owner).where('status', '=', 'open').execute()
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
    const derived = await this.db
      .selectFrom('accounts')
      .leftJoin('postings', 'postings.account_id', 'accounts.id')
      .select([
        'accounts.address', 'accounts.balance', 'accounts.held',
        sql<bigint>`coalesce(sum(case when postings.book in ('available','held') then postings.amount else 0 end), 0)`.as('posted_balance'),
        sql<bigint>`coalesce(sum(case when postings.book = 'held' then postings.amount else 0 end), 0)`.as('posted_held'),
      ])
      .where('accounts.kind', '=', 'user')
      .groupBy(['accounts.id', 'accounts.address', 'accounts.balance', 'accounts.held'])
      .execute()
    const inconsistent = derived
      .map((r) => ({ address: r.address, balance: big(r.balance), held: big(r.held), postedBalance: big(r.posted_balance), postedHeld: big(r.posted_held) }))
      .filter((r) => r.balance !== r.postedBalance || r.held !== r.postedHeld || r.balance < 0n || r.held < 0n)
    return { unbalanced: unbalanced.map((r) => ({ ref: r.ref, sum: big(r.sum) })), inconsistent, openHolds: await this.openHolds() }
  }
}

async function insertPostings(trx: Transaction<Database>, now: number, postings: Posting[]): Promise<void> {
  if (postings.length === 0) return
  const created_at = BigInt(now)
  await trx.insertInto('postings').values(postings.map((p) => ({ ...p, created_at }))).execute()
}

/** Which open holds a release closes. */
type HoldSelector = { requestId: string } | { expiredBefore: number } | { owners: string[] }

/** Releases the open holds the selector picks, returning how many; writes usage for sweeps (`outcome`). */
async function releaseWhere(trx: Transaction<Database>, now: number, which: HoldSelector, outcome?: Outcome): Promise<number> {
  let q = trx.updateTable('holds').set({ status: 'released', closed_at: BigInt(now) }).where('status', '=', 'open')
  if ('requestId' in which) q = q.where('request_id', '=', which.requestId)
  else if ('expiredBefore' in which) q = q.where('expires_at', '<', BigInt(which.expiredBefore))
  else q = q.where('owner', 'in', which.owners)
  const released = await q.returning(['request_id', 'account_id', 'amount', 'key_id', 'model', 'created_at']).execute()
  const postings: Posting[] = []
  for (const h of released) {
    const accountId = num(h.account_id)
    const amount = big(h.amount)
    await trx.updateTable('accounts').set({ held: sql`held - ${amount}` }).where('id', '=', accountId).execute()
    postings.push({ ref: h.request_id, account_id: accountId, book: 'held', kind: 'release', amount: -amount })
    postings.push({ ref: h.request_id, account_id: accountId, book: 'available', kind: 'release', amount })
    if (outcome) {
      const created = num(h.created_at)
      await trx.insertInto('usage').values(usageRow({
        requestId: h.request_id, accountId, keyId: h.key_id, model: h.model, servedModel: null, provider: null, stream: false,
        promptTokens: 0, completionTokens: 0, upstreamPromptTokens: null, upstreamCompletionTokens: null, cost: 0n,
        outcome, latencyMs: now - created, createdAt: created,
      })).onConflict((oc) => oc.column('request_id').doNothing()).execute()
    }
  }
  await insertPostings(trx, now, postings)
  return released.length
}
