import { sql, type ExpressionBuilder, type Insertable, type Kysely, type Transaction } from 'kysely'
import type { Database, HeldEarningsTable, PostingsTable } from './schema.js'
import { big, num } from './ints.js'
import { MAX_STORED } from './chain.js'

export type HeldStatus = 'held' | 'released' | 'forfeited'

/** An offer's earnings held back from settlement, and what became of them. */
export interface HeldEarnings {
  id: string
  provider: string
  model: string
  /** Charges of requests that began at or after this, and before `toAt` (when set), are held. */
  fromAt: number
  /** When the offer left quarantine: requests that began since are its own again. Null while quarantined. */
  toAt: number | null
  status: HeldStatus
  /** The audit that quarantined the offer. */
  auditId: string
  createdAt: number
  decidedAt: number | null
  note: string | null
  /** What a forfeit refunded to payers, and how many charges. */
  refunded: bigint | null
  refundedCharges: number | null
}

/**
 * What a forfeited charge's `batch_id` becomes: it leaves the due charges, the unsettled sum and what its wallet owes
 * as a batched charge does, and no batch (no row of `batches`) ever pays it.
 */
export const FORFEITED_PREFIX = 'forfeited:'

const rowOf = (r: HeldEarningsTable): HeldEarnings => ({
  id: r.id,
  provider: r.provider,
  model: r.model,
  fromAt: num(r.from_at),
  toAt: r.to_at === null ? null : num(r.to_at),
  status: r.status as HeldStatus,
  auditId: r.audit_id,
  createdAt: num(r.created_at),
  decidedAt: r.decided_at === null ? null : num(r.decided_at),
  note: r.note,
  refunded: r.refunded === null ? null : big(r.refunded),
  refundedCharges: r.refunded_charges === null ? null : num(r.refunded_charges),
})

/**
 * Whether a charge (a `holds` row) is held back from settlement by held earnings of its offer covering when its request
 * began. For the due charges' query (`dueCharges`) and their assignment to a batch.
 */
export function withheld(eb: ExpressionBuilder<Database, 'holds'>) {
  return eb.exists(
    eb
      .selectFrom('held_earnings')
      .select('held_earnings.id')
      .where('held_earnings.status', '=', sql.lit('held'))
      .whereRef('held_earnings.provider', '=', 'holds.provider')
      .where((w) => w('held_earnings.model', '=', w.fn.coalesce('holds.served_model', 'holds.model')))
      .whereRef('holds.created_at', '>=', 'held_earnings.from_at')
      .where((w) =>
        w.or([w('held_earnings.to_at', 'is', null), w('holds.created_at', '<', w.ref('held_earnings.to_at'))]),
      ),
  )
}

/** The captured, unbatched charges `h` holds back. */
function heldCharges(db: Kysely<Database> | Transaction<Database>, h: HeldEarnings) {
  let q = db
    .selectFrom('holds')
    .where('status', '=', sql.lit('captured'))
    .where('batch_id', 'is', null)
    .where('cost', '>', 0n)
    .where('provider', '=', h.provider)
    .where((w) => w(w.fn.coalesce('served_model', 'model'), '=', h.model))
    .where('created_at', '>=', BigInt(h.fromAt))
  if (h.toAt !== null) q = q.where('created_at', '<', BigInt(h.toAt))
  return q
}

/** Rows written per statement by a forfeit. */
const SLICE = 500

/**
 * Earnings held back from settlement (docs/architecture.md §11a): held when an offer enters quarantine, ended (`toAt`)
 * when it leaves, then released (paid in the next batches) or forfeited (refunded to the payers) by an operator; each
 * decision kept.
 */
export class HeldEarningsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Holds an offer's earnings since `fromAt`; the hold open for the offer, if there is one, is kept instead (at most
   * one is open per offer: a partial unique index).
   */
  async hold(h: { id: string; provider: string; model: string; fromAt: number; auditId: string; now: number }) {
    const row: HeldEarningsTable = {
      id: h.id,
      provider: h.provider,
      model: h.model,
      from_at: BigInt(h.fromAt),
      to_at: null,
      status: 'held',
      audit_id: h.auditId,
      created_at: BigInt(h.now),
      decided_at: null,
      note: null,
      refunded: null,
      refunded_charges: null,
    }
    const inserted = await this.db
      .insertInto('held_earnings')
      .values(row)
      .onConflict((oc) => oc.columns(['provider', 'model']).where('status', '=', sql.lit('held')).doNothing())
      .returningAll()
      .executeTakeFirst()
    if (inserted) return { held: rowOf(inserted), created: true }
    return { held: (await this.open(h.provider, h.model))!, created: false }
  }

  /** The hold of the offer still undecided, if any. */
  async open(provider: string, model: string): Promise<HeldEarnings | undefined> {
    const r = await this.db
      .selectFrom('held_earnings')
      .selectAll()
      .where('provider', '=', provider)
      .where('model', '=', model)
      .where('status', '=', 'held')
      .orderBy('created_at', 'desc')
      .executeTakeFirst()
    return r && rowOf(r)
  }

  /** The offer left quarantine at `now`: its open hold covers no request that begins from then. */
  async end(provider: string, model: string, now: number): Promise<void> {
    await this.db
      .updateTable('held_earnings')
      .set({ to_at: BigInt(now) })
      .where('provider', '=', provider)
      .where('model', '=', model)
      .where('status', '=', 'held')
      .where('to_at', 'is', null)
      .execute()
  }

  async get(id: string): Promise<HeldEarnings | undefined> {
    const r = await this.db.selectFrom('held_earnings').selectAll().where('id', '=', id).executeTakeFirst()
    return r && rowOf(r)
  }

  /** Held earnings, newest first; of one status when given. */
  async list(status?: HeldStatus, limit = 100): Promise<HeldEarnings[]> {
    let q = this.db.selectFrom('held_earnings').selectAll()
    if (status) q = q.where('status', '=', status)
    return (await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute()).map(rowOf)
  }

  /** What earnings still held hold now: the charges kept out of settlement and their sum. */
  async amount(h: HeldEarnings): Promise<{ charges: number; total: bigint }> {
    const r = await heldCharges(this.db, h)
      .select([(eb) => eb.fn.countAll<number | bigint>().as('n'), sql<bigint>`coalesce(sum(cost), 0)`.as('total')])
      .executeTakeFirstOrThrow()
    return { charges: num(r.n), total: big(r.total) }
  }

  /** Releases held earnings: their charges are due again, paid in the next batch. False when not held. */
  async release(id: string, now: number, note: string | null): Promise<boolean> {
    const r = await this.db
      .updateTable('held_earnings')
      .set({ status: 'released', decided_at: BigInt(now), note })
      .where('id', '=', id)
      .where('status', '=', 'held')
      .executeTakeFirst()
    return Number(r.numUpdatedRows) === 1
  }

  /**
   * Forfeits held earnings in one transaction. Each held charge is claimed (`FORFEITED_PREFIX` as its batch, by the
   * same conditional update a batch assigns with, so a charge a concurrent batch took is not claimed and one claimed
   * is never batched), refunded to its payer (its balance and approved cap back up by the cost, its debt down by it:
   * the charge is never collected), taken from the payee's and the fee account's pending earnings, and named in
   * `forfeited_charges`. Undefined when not held.
   */
  async forfeit(
    id: string,
    now: number,
    note: string | null,
  ): Promise<{ charges: number; refunded: bigint } | undefined> {
    return this.db.transaction().execute(async (trx) => {
      const taken = await trx
        .updateTable('held_earnings')
        .set({ status: 'forfeited', decided_at: BigInt(now), note })
        .where('id', '=', id)
        .where('status', '=', 'held')
        .returningAll()
        .executeTakeFirst()
      if (!taken) return undefined
      const h = rowOf(taken)
      // The held charges, claimed by the conditional update a batch assigns with (still unbatched, row by row).
      const claim = trx
        .updateTable('holds')
        .set({ batch_id: `${FORFEITED_PREFIX}${h.id}` })
        .where('request_id', 'in', heldCharges(trx, h).select('request_id'))
        .where('batch_id', 'is', null)
      const charges = await claim
        .returning(['request_id', 'account_id', 'payee_id', 'fee_account_id', 'cost', 'fee'])
        .execute()
      const created_at = BigInt(now)
      const byPayer = new Map<number, bigint>()
      const postings: Insertable<PostingsTable>[] = []
      let refunded = 0n
      for (const c of charges) {
        const cost = big(c.cost ?? 0)
        const fee = big(c.fee ?? 0)
        const ref = `refund:${c.request_id}`
        const payer = num(c.account_id)
        postings.push({ ref, account_id: payer, book: 'available', kind: 'refund', amount: cost, created_at })
        postings.push({
          ref,
          account_id: num(c.payee_id!),
          book: 'pending',
          kind: 'refund',
          amount: fee - cost,
          created_at,
        })
        if (fee > 0n && c.fee_account_id !== null)
          postings.push({
            ref,
            account_id: num(c.fee_account_id),
            book: 'pending',
            kind: 'refund',
            amount: -fee,
            created_at,
          })
        byPayer.set(payer, (byPayer.get(payer) ?? 0n) + cost)
        refunded += cost
      }
      for (let i = 0; i < postings.length; i += SLICE)
        await trx
          .insertInto('posting_rows')
          .values(postings.slice(i, i + SLICE))
          .execute()
      const records = charges.map((c) => ({ request_id: c.request_id, held_id: h.id, amount: big(c.cost ?? 0) }))
      for (let i = 0; i < records.length; i += SLICE)
        await trx
          .insertInto('forfeited_charges')
          .values(records.slice(i, i + SLICE))
          .execute()
      // Accounts in ascending order, as the hot ledger's groups lock theirs: the two cannot deadlock.
      for (const [accountId, amount] of [...byPayer].sort(([a], [b]) => a - b))
        await trx
          .updateTable('accounts')
          .set({
            balance: sql`balance + ${amount}`,
            cap: sql`case when cap > ${MAX_STORED - amount} then ${MAX_STORED} else cap + ${amount} end`,
            debt: sql`case when debt > ${amount} then debt - ${amount} else 0 end`,
          })
          .where('id', '=', accountId)
          .execute()
      await trx
        .updateTable('held_earnings')
        .set({ refunded, refunded_charges: charges.length })
        .where('id', '=', id)
        .execute()
      return { charges: charges.length, refunded }
    })
  }
}
