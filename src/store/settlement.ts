import { sql, type Kysely } from 'kysely'
import type { BatchStatus, Database } from './schema.js'
import type { PayeeSumsReader, StoreDialect } from './dialect.js'
import { big, num } from './ints.js'
import { toBatch, type Batch, type BatchLimits, type Leg, type PayeeSums } from './batch-types.js'
import { UNCACHED_POSTINGS } from './accounts.js'
import { buildBatch, dueCharges } from './batch-build.js'
import { markSent, markSettled, openBuilt } from './batch-states.js'
import { restoreRefunds } from './x402.js'

export type { Batch, BatchLimits, Leg, PayeeSums } from './batch-types.js'

/** Settlement batches: captured charges grouped into payer → payee legs, settled once. */
export class SettlementRepo {
  /** Payees' sums over their request rows and written postings, as the dialect reads them (`payeeSums`). */
  private readonly sums: PayeeSumsReader

  constructor(
    private readonly db: Kysely<Database>,
    dialect: StoreDialect,
    sliceRows?: number,
  ) {
    this.sums = dialect.payeeSums(db, { whole: (accountId) => this.wholeSums(accountId), sliceRows })
  }

  /**
   * Builds a new batch of the due charges and opens it (batch-build.ts); null when nothing is due, or another settler
   * opened it while it was built (that settler sends it). A batch of up to `maxHolds` charges (10,000 by default),
   * built `step` charges per transaction.
   */
  async createBatch({
    id,
    feeAccountId,
    now,
    limits = {},
    step,
  }: {
    id: string
    feeAccountId: number
    now: number
    limits?: BatchLimits
    step?: number
  }): Promise<Batch | null> {
    const total = await buildBatch(this.db, { id, feeAccountId, now }, limits, step)
    if (total === null) return null
    return {
      id,
      status: 'open',
      total,
      createdAt: now,
      sentAt: null,
      settledAt: null,
      txHash: null,
      nonce: null,
      block: null,
      receiptsRoot: null,
    }
  }

  /** Opens the batches a settler left building (it stopped between two of their steps): they are sent as they are. */
  openBuilt(): Promise<void> {
    return openBuilt(this.db)
  }

  async legs(batchId: string): Promise<Leg[]> {
    const rows = await this.db
      .selectFrom('batch_legs')
      .selectAll()
      .where('batch_id', '=', batchId)
      .orderBy('payer_id')
      .orderBy('payee_id')
      .execute()
    return rows.map((r) => ({ payerId: num(r.payer_id), payeeId: num(r.payee_id), amount: big(r.amount) }))
  }

  async batches(statuses: BatchStatus[]): Promise<Batch[]> {
    const rows = await this.db
      .selectFrom('batches')
      .selectAll()
      .where('status', 'in', statuses)
      .orderBy('created_at')
      .orderBy('id')
      .execute()
    return rows.map(toBatch)
  }

  async countBatches(statuses: BatchStatus[]): Promise<number> {
    const r = await this.db
      .selectFrom('batches')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', 'in', statuses)
      .executeTakeFirstOrThrow()
    return num(r.n)
  }

  /** Captured charges not yet paid out: those in no batch, and the totals of batches not yet settled. */
  async unsettled(): Promise<bigint> {
    const unbatched = await this.db
      .selectFrom('holds')
      .select(sql<bigint>`coalesce(sum(cost), 0)`.as('total'))
      .where('status', '=', sql.lit('captured'))
      .where('batch_id', 'is', null)
      .executeTakeFirstOrThrow()
    const batched = await this.db
      .selectFrom('batches')
      .select(sql<bigint>`coalesce(sum(total), 0)`.as('total'))
      .where('status', 'in', ['building', 'open', 'sent'])
      .executeTakeFirstOrThrow()
    return big(unbatched.total) + big(batched.total)
  }

  /** Records that a batch's transaction went out; the tx hash lets a restart find it instead of sending again. */
  async markSent(batchId: string, txHash: string, nonce: number, now: number): Promise<void> {
    await markSent(this.db, { batchId, txHash, nonce, now })
  }

  /**
   * Marks a batch settled and moves each payee's pending to available. Legs of `failedPayers` and `deferredPayers` fail
   * and their charges return to the due pool; a failed payer's debt grows by the amount (admission refuses it until
   * covered), a deferred one's (a payee the token refuses) does not. A replay changes nothing and returns false.
   */
  async markSettled(
    batchId: string,
    now: number,
    failedPayers: readonly number[] = [],
    deferredPayers: readonly number[] = [],
  ): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      if (!(await markSettled(trx, batchId, now))) return false
      const failed = [...failedPayers]
      const unpaid = [...failed, ...deferredPayers]
      // A leg from an account to itself is a prepaid account's refund (x402.ts): no payee earned it.
      let paidLegs = trx
        .selectFrom('batch_legs')
        .select(['payee_id', sql<bigint>`sum(amount)`.as('amount')])
        .where('batch_id', '=', batchId)
        .whereRef('payer_id', '<>', 'payee_id')
      if (unpaid.length) paidLegs = paidLegs.where('payer_id', 'not in', unpaid)
      const perPayee = await paidLegs.groupBy('payee_id').execute()
      const created_at = BigInt(now)
      const rows = perPayee.flatMap((p) => [
        {
          ref: batchId,
          account_id: num(p.payee_id),
          book: 'pending' as const,
          kind: 'settlement' as const,
          amount: -big(p.amount),
          created_at,
        },
        {
          ref: batchId,
          account_id: num(p.payee_id),
          book: 'available' as const,
          kind: 'settlement' as const,
          amount: big(p.amount),
          created_at,
        },
      ])
      if (rows.length) await trx.insertInto('posting_rows').values(rows).execute()
      if (unpaid.length) {
        const refunds = await trx
          .selectFrom('batch_legs')
          .select(['payer_id', 'amount'])
          .where('batch_id', '=', batchId)
          .where('payer_id', 'in', unpaid)
          .whereRef('payer_id', '=', 'payee_id')
          .orderBy('payer_id')
          .execute()
        const legs = refunds.map((r) => ({ payerId: num(r.payer_id), payeeId: num(r.payer_id), amount: big(r.amount) }))
        await restoreRefunds(trx, { ref: batchId, legs, now })
        await trx
          .updateTable('batch_legs')
          .set({ failed: 1 })
          .where('batch_id', '=', batchId)
          .where('payer_id', 'in', unpaid)
          .execute()
        await trx
          .updateTable('holds')
          .set({ batch_id: null })
          .where('batch_id', '=', batchId)
          .where('account_id', 'in', unpaid)
          .execute()
      }
      if (failed.length) {
        const owed = await trx
          .selectFrom('batch_legs')
          .select(['payer_id', sql<bigint>`sum(amount)`.as('amount')])
          .where('batch_id', '=', batchId)
          .where('payer_id', 'in', failed)
          .whereRef('payer_id', '<>', 'payee_id')
          .groupBy('payer_id')
          // Accounts locked in ascending order, as the hot ledger's groups lock theirs: the two cannot deadlock.
          .orderBy('payer_id')
          .execute()
        for (const o of owed)
          await trx
            .updateTable('accounts')
            .set({ debt: sql`debt + ${big(o.amount)}` })
            .where('id', '=', num(o.payer_id))
            .execute()
      }
      return true
    })
  }

  /** The payees of charges due for settlement (debtors' aside): whom the next batches would pay. */
  async duePayees(): Promise<number[]> {
    const rows = await dueCharges(this.db).select('payee_id').distinct().execute()
    return rows.flatMap((r) => (r.payee_id === null ? [] : [num(r.payee_id)]))
  }

  /** Payees' pending (earned, unsettled) and settled sums. */
  async payeeTotals(accountId: number): Promise<{ pending: bigint; settled: bigint }> {
    const { pending, settled } = await this.sums.of(accountId)
    return { pending, settled }
  }

  /** A payee's sums read whole: the postings' books and the captured request rows it was paid for. */
  private async wholeSums(accountId: number): Promise<PayeeSums> {
    const [books, paid] = await Promise.all([
      this.payeeTotalsQuery(accountId).executeTakeFirstOrThrow(),
      this.db
        .selectFrom('holds')
        .select([
          (eb) => eb.fn.countAll().as('requests'),
          sql<bigint>`coalesce(sum(cost), 0)`.as('gross'),
          sql<bigint>`coalesce(sum(cost - fee), 0)`.as('earned'),
        ])
        .where('payee_id', '=', accountId)
        .where('status', '=', 'captured')
        .executeTakeFirstOrThrow(),
    ])
    return {
      requests: num(paid.requests),
      gross: big(paid.gross),
      earned: big(paid.earned),
      pending: big(books.pending),
      settled: big(books.settled),
    }
  }

  /**
   * The query behind `payeeTotals` on Postgres (and the whole of it anywhere): through the index of uncached postings
   * and the request rows' payee and fee indexes, never every posting (a test reads its plan).
   */
  payeeTotalsQuery(accountId: number) {
    return this.db
      .selectFrom('postings')
      .select([
        sql<bigint>`coalesce(sum(case when book = 'pending' then amount else 0 end), 0)`.as('pending'),
        sql<bigint>`coalesce(sum(case when book = 'available' and kind = 'settlement' then amount else 0 end), 0)`.as(
          'settled',
        ),
      ])
      .where('account_id', '=', accountId)
      .where(UNCACHED_POSTINGS)
  }

  /**
   * What a payee earned from captured charges: requests served, gross charged and its share after fees; charges
   * forfeited by an audit decision (refunded to their payers) are not earned.
   */
  async payeeEarnings(accountId: number): Promise<{ requests: number; gross: bigint; earned: bigint }> {
    const [{ requests, gross, earned }, lost] = await Promise.all([this.sums.of(accountId), this.forfeited(accountId)])
    return { requests: requests - lost.requests, gross: gross - lost.gross, earned: earned - lost.earned }
  }

  /** A payee's forfeited charges, from the (small) record of forfeits. */
  private async forfeited(accountId: number): Promise<{ requests: number; gross: bigint; earned: bigint }> {
    const r = await this.db
      .selectFrom('forfeited_charges')
      .innerJoin('holds', 'holds.request_id', 'forfeited_charges.request_id')
      .select([
        (eb) => eb.fn.countAll().as('requests'),
        sql<bigint>`coalesce(sum(holds.cost), 0)`.as('gross'),
        sql<bigint>`coalesce(sum(holds.cost - holds.fee), 0)`.as('earned'),
      ])
      .where('holds.payee_id', '=', accountId)
      .executeTakeFirstOrThrow()
    return { requests: num(r.requests), gross: big(r.gross), earned: big(r.earned) }
  }

  /**
   * The batches that pay this payee, newest first, with the amount each paid it (legs of payers it failed to collect
   * left out). Its newest legs are read first, through its index by batch, as far as `limit` batches: a batch's id is
   * `bat_` and a ULID of the time it was created (the settler's), so newest by id is newest by time.
   */
  async payeeBatches(accountId: number, limit = 20): Promise<(Batch & { amount: bigint })[]> {
    const paid = await this.paidBatchesQuery(accountId, limit).execute()
    if (paid.length === 0) return []
    const amounts = new Map(paid.map((p) => [p.batch_id, big(p.amount)]))
    const rows = await this.db
      .selectFrom('batches')
      .selectAll()
      .where('id', 'in', [...amounts.keys()])
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute()
    return rows.map((r) => ({ ...toBatch(r), amount: amounts.get(r.id)! }))
  }

  /**
   * The payee's newest `limit` batches' ids and what each paid it, read newest first from its index (a test reads its
   * plan).
   */
  paidBatchesQuery(accountId: number, limit: number) {
    return this.db
      .selectFrom('batch_legs')
      .select(['batch_id', sql<bigint>`sum(amount)`.as('amount')])
      .where('payee_id', '=', accountId)
      .where('failed', '=', 0)
      .groupBy('batch_id')
      .orderBy('batch_id', 'desc')
      .limit(limit)
  }
}
