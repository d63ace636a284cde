import { sql, type ExpressionBuilder, type Kysely, type Transaction } from 'kysely'
import type { Database, HeldEarningsTable } from './schema.js'
import { big, num } from './ints.js'

export type HeldStatus = 'held' | 'released' | 'forfeited'

/** An offer's earnings held back from settlement, and what became of them. */
export interface HeldEarnings {
  id: string
  provider: string
  model: string
  /** Charges of requests that began at or after this are held. */
  fromAt: number
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

const rowOf = (r: HeldEarningsTable): HeldEarnings => ({
  id: r.id,
  provider: r.provider,
  model: r.model,
  fromAt: num(r.from_at),
  status: r.status as HeldStatus,
  auditId: r.audit_id,
  createdAt: num(r.created_at),
  decidedAt: r.decided_at === null ? null : num(r.decided_at),
  note: r.note,
  refunded: r.refunded === null ? null : big(r.refunded),
  refundedCharges: r.refunded_charges === null ? null : num(r.refunded_charges),
})

/**
 * Whether a charge (a `holds` row) is kept out of settlement: by held earnings of its offer covering when it began, or
 * because it was forfeited. For the due charges' query (`dueCharges`).
 */
export function withheld(eb: ExpressionBuilder<Database, 'holds'>) {
  return eb.or([
    eb.exists(
      eb
        .selectFrom('held_earnings')
        .select('held_earnings.id')
        .where('held_earnings.status', '=', sql.lit('held'))
        .whereRef('held_earnings.provider', '=', 'holds.provider')
        .where((w) => w('held_earnings.model', '=', w.fn.coalesce('holds.served_model', 'holds.model')))
        .whereRef('holds.created_at', '>=', 'held_earnings.from_at'),
    ),
    forfeited(eb),
  ])
}

/** Whether a charge (a `holds` row) was forfeited: refunded to its payer, never owed or settled. */
export function forfeited(eb: ExpressionBuilder<Database, 'holds'>) {
  return eb.exists(
    eb
      .selectFrom('forfeited_charges')
      .select('forfeited_charges.request_id')
      .whereRef('forfeited_charges.request_id', '=', 'holds.request_id'),
  )
}

/** The captured, unbatched charges `h` holds back (those a forfeit refunds), in a transaction. */
function heldCharges(db: Kysely<Database> | Transaction<Database>, h: HeldEarnings) {
  return db
    .selectFrom('holds')
    .where('status', '=', sql.lit('captured'))
    .where('batch_id', 'is', null)
    .where('cost', '>', 0n)
    .where('provider', '=', h.provider)
    .where((w) => w(w.fn.coalesce('served_model', 'model'), '=', h.model))
    .where('created_at', '>=', BigInt(h.fromAt))
    .where((eb) => eb.not(forfeited(eb)))
}

/**
 * Earnings held back from settlement (docs/architecture.md §11a): held when an offer is quarantined, then released
 * (paid in the next batches) or forfeited (refunded to the payers) by an operator; each decision kept.
 */
export class HeldEarningsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Holds an offer's earnings since `fromAt`; the hold already in force for the offer, if any, is kept instead. */
  async hold(h: { id: string; provider: string; model: string; fromAt: number; auditId: string; now: number }) {
    return this.db.transaction().execute(async (trx) => {
      const open = await trx
        .selectFrom('held_earnings')
        .selectAll()
        .where('provider', '=', h.provider)
        .where('model', '=', h.model)
        .where('status', '=', 'held')
        .executeTakeFirst()
      if (open) return { held: rowOf(open), created: false }
      const row: HeldEarningsTable = {
        id: h.id,
        provider: h.provider,
        model: h.model,
        from_at: BigInt(h.fromAt),
        status: 'held',
        audit_id: h.auditId,
        created_at: BigInt(h.now),
        decided_at: null,
        note: null,
        refunded: null,
        refunded_charges: null,
      }
      await trx.insertInto('held_earnings').values(row).execute()
      return { held: rowOf(row), created: true }
    })
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
   * Forfeits held earnings in one transaction: each held charge is refunded to its payer (its balance and approved cap
   * back up by the cost: the charge is never collected), taken from the payee's and the fee account's pending earnings,
   * and named in `forfeited_charges`, never settled. Undefined when not held.
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
      const charges = await heldCharges(trx, h)
        .select(['request_id', 'account_id', 'payee_id', 'fee_account_id', 'cost', 'fee'])
        .execute()
      const created_at = BigInt(now)
      const byPayer = new Map<number, bigint>()
      let refunded = 0n
      for (const c of charges) {
        const cost = big(c.cost ?? 0)
        const fee = big(c.fee ?? 0)
        const ref = `refund:${c.request_id}`
        const postings = [
          {
            ref,
            account_id: num(c.account_id),
            book: 'available' as const,
            kind: 'refund' as const,
            amount: cost,
            created_at,
          },
          {
            ref,
            account_id: num(c.payee_id!),
            book: 'pending' as const,
            kind: 'refund' as const,
            amount: fee - cost,
            created_at,
          },
        ]
        if (fee > 0n && c.fee_account_id !== null)
          postings.push({
            ref,
            account_id: num(c.fee_account_id),
            book: 'pending',
            kind: 'refund',
            amount: -fee,
            created_at,
          })
        await trx.insertInto('posting_rows').values(postings).execute()
        await trx
          .insertInto('forfeited_charges')
          .values({ request_id: c.request_id, held_id: h.id, amount: cost })
          .execute()
        byPayer.set(num(c.account_id), (byPayer.get(num(c.account_id)) ?? 0n) + cost)
        refunded += cost
      }
      for (const [accountId, amount] of byPayer)
        await trx
          .updateTable('accounts')
          .set({ balance: sql`balance + ${amount}`, cap: sql`cap + ${amount}` })
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
