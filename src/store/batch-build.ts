import { setImmediate as nextTurn } from 'node:timers/promises'
import { sql, type Kysely, type Transaction } from 'kysely'
import type { Database } from './schema.js'
import { big, num } from './ints.js'
import type { BatchLimits, Leg } from './batch-types.js'
import { beginBuilding, openBuilt } from './batch-states.js'
import { withheld } from './held-earnings.js'
import { REFUNDS_PER_BATCH, takeRefunds } from './x402.js'

/**
 * Charges assigned to a batch per transaction: a step short enough not to hold a SQLite gateway's event loop for long
 * (docs/architecture.md §15.1).
 */
export const CHARGES_PER_STEP = 500

/** Charges not yet in a batch, of payers not in debt, not held back from settlement (`withheld`). */
export function dueCharges(db: Kysely<Database>) {
  const debtors = db.selectFrom('accounts').select('id').where('debt', '>', 0n)
  return db
    .selectFrom('holds')
    .where('status', '=', sql.lit('captured'))
    .where('batch_id', 'is', null)
    .where('cost', '>', 0n)
    .where('account_id', 'not in', debtors)
    .where((eb) => eb.not(withheld(eb)))
}

/** The batch a settler builds: its id, the account its fees are paid to, and when it was created. */
export interface NewBatch {
  id: string
  feeAccountId: number
  now: number
}

/** The batch was opened by another settler while this one built it: the charges left stay due. */
class NoLongerBuilding extends Error {}

/**
 * Builds batch `id` of the due charges, CHARGES_PER_STEP per transaction, and opens it; its total, or null when nothing
 * was due or another settler opened it first. While `building` no settler sends it; each step commits a whole batch, so
 * a crash leaves a smaller one, opened by the next pass (`openBuilt`). docs/architecture.md §15.1.
 */
export async function buildBatch(
  db: Kysely<Database>,
  batch: NewBatch,
  limits: BatchLimits,
  step = CHARGES_PER_STEP,
): Promise<bigint | null> {
  const due = await dueIds(db, batch.feeAccountId, limits)
  let total = 0n
  let begun = false
  for (let at = 0; at < due.length; at += step) {
    if (at > 0) await nextTurn()
    const added = await db
      .transaction()
      .execute((trx) => addCharges(trx, batch, due.slice(at, at + step), begun))
      .catch((err: unknown) => {
        if (err instanceof NoLongerBuilding) return undefined
        throw err
      })
    // Another settler opened it: that settler sends it (sent by both, it would cost a nonce race and gas).
    if (added === undefined) return null
    begun ||= added.assigned > 0
    total += added.total
  }
  // Prepaid funds no request needs go back to their wallets in the same batch, as legs beside the charges'.
  const refundRoom = limits.maxLegs === undefined ? REFUNDS_PER_BATCH : limits.maxLegs - (await legCount(db, batch.id))
  const refunded = await db
    .transaction()
    .execute((trx) => addRefunds(trx, batch, Math.min(REFUNDS_PER_BATCH, refundRoom), begun))
    .catch((err: unknown) => {
      if (err instanceof NoLongerBuilding) return undefined
      throw err
    })
  if (refunded === undefined) return null
  begun ||= refunded.assigned > 0
  total += refunded.total
  if (!begun) return null
  await openBuilt(db, batch.id)
  return total
}

/**
 * The request ids of the charges the next batch takes, read in one snapshot; those of accounts in debt wait until it is
 * covered (collected again, they would fail again). With `maxLegs`, whole payers are taken in order while their legs
 * (one per payee, one for the fee) fit; a payer with more legs alone is split by payee, so no batch ever has more.
 */
async function dueIds(db: Kysely<Database>, feeAccountId: number, limits: BatchLimits): Promise<string[]> {
  return db
    .transaction()
    .setAccessMode('read only')
    .setIsolationLevel('repeatable read')
    .execute(async (trx) => {
      const { payers: refusedPayers = [], payees: refusedPayees = [] } = limits.exclude ?? {}
      const dueBase = () => {
        let q = dueCharges(trx)
        if (refusedPayers.length) q = q.where('account_id', 'not in', refusedPayers)
        if (refusedPayees.length) q = q.where('payee_id', 'not in', refusedPayees)
        if (refusedPayees.includes(feeAccountId)) q = q.where('fee', '=', 0n)
        return q
      }
      let due = dueBase()
        .select('request_id')
        .limit(limits.maxHolds ?? 10_000)
      if (limits.maxLegs !== undefined) {
        const maxLegs = limits.maxLegs
        const perPayer = await dueBase()
          .select(['account_id', (eb) => eb.fn.count<number>('payee_id').distinct().as('payees')])
          .groupBy('account_id')
          .orderBy('account_id')
          .execute()
        if (perPayer.length === 0) return []
        const payers: number[] = []
        let legs = 0
        for (const p of perPayer) {
          const n = num(p.payees) + 1
          if (legs + n > maxLegs) break
          payers.push(num(p.account_id))
          legs += n
        }
        if (payers.length > 0) due = due.where('account_id', 'in', payers)
        else {
          // The first payer alone needs more legs than a transaction may carry: its charges to its first maxLegs − 1
          // payees go now, beside its fee leg; the rest stay due for the batches after.
          const payer = num(perPayer[0]!.account_id)
          const payees = await dueBase()
            .where('account_id', '=', payer)
            .select('payee_id')
            .distinct()
            .orderBy('payee_id')
            .limit(maxLegs - 1)
            .execute()
          due = due.where('account_id', '=', payer).where(
            'payee_id',
            'in',
            payees.map((p) => num(p.payee_id)),
          )
        }
      }
      return (await due.execute()).map((r) => r.request_id)
    })
}

/**
 * Assigns those of `ids` still due to the batch and adds their legs and total to it (creating it, building, with the
 * first charges); how many it assigned and their total. Throws NoLongerBuilding, rolling back, when the batch was
 * opened meanwhile.
 */
async function addCharges(
  trx: Transaction<Database>,
  { id, feeAccountId, now }: NewBatch,
  ids: string[],
  begun: boolean,
): Promise<{ assigned: number; total: bigint }> {
  // Still due: since the ids were read, another settler may have batched a charge, failed to collect it, and put its
  // payer in debt (its charge is then due again to no one, and would be counted in that debt a second time).
  const assigned = await trx
    .updateTable('holds')
    .set({ batch_id: id })
    .where('request_id', 'in', ids)
    .where('batch_id', 'is', null)
    .where('status', '=', sql.lit('captured'))
    // Nor held back since they were read (an offer quarantined meanwhile).
    .where((eb) => eb.not(withheld(eb)))
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('accounts').select('id').whereRef('accounts.id', '=', 'holds.account_id').where('debt', '>', 0n),
        ),
      ),
    )
    // The charges as they were assigned: their legs are summed here, not read again (by id, a cost per charge).
    .returning(['account_id', 'payee_id', 'cost', 'fee'])
    .execute()
  if (assigned.length === 0) return { assigned: 0, total: 0n }
  const legs = new Map<string, Leg>()
  const add = (payerId: number, payeeId: number, amount: bigint) => {
    if (amount <= 0n) return
    const k = `${payerId}:${payeeId}`
    const leg = legs.get(k)
    if (leg) leg.amount += amount
    else legs.set(k, { payerId, payeeId, amount })
  }
  for (const c of assigned) {
    const fee = big(c.fee ?? 0)
    add(num(c.account_id), num(c.payee_id), big(c.cost) - fee)
    add(num(c.account_id), feeAccountId, fee)
  }
  const total = await addLegs(trx, { id, now }, [...legs.values()], begun)
  return { assigned: assigned.length, total }
}

/** Takes the prepaid accounts' refunds into the batch (`takeRefunds`), as addCharges takes charges. */
async function addRefunds(
  trx: Transaction<Database>,
  { id, now }: NewBatch,
  max: number,
  begun: boolean,
): Promise<{ assigned: number; total: bigint }> {
  const legs = await takeRefunds(trx, { ref: id, now, max })
  if (legs.length === 0) return { assigned: 0, total: 0n }
  return { assigned: legs.length, total: await addLegs(trx, { id, now }, legs, begun) }
}

async function legCount(db: Kysely<Database>, batchId: string): Promise<number> {
  const r = await db
    .selectFrom('batch_legs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('batch_id', '=', batchId)
    .executeTakeFirstOrThrow()
  return num(r.n)
}

/**
 * Adds legs to the batch (creating it, building, with the first ones) and their sum to its total; the sum. Throws
 * NoLongerBuilding, rolling back, when the batch was opened meanwhile.
 */
async function addLegs(
  trx: Transaction<Database>,
  { id, now }: { id: string; now: number },
  legs: Leg[],
  begun: boolean,
): Promise<bigint> {
  const total = legs.reduce((s, l) => s + l.amount, 0n)
  if (!begun) {
    await beginBuilding(trx, { id, total, now })
  } else {
    const still = await trx
      .updateTable('batches')
      .set({ total: sql`total + ${total}` })
      .where('id', '=', id)
      .where('status', '=', 'building')
      .returning('id')
      .executeTakeFirst()
    if (!still) throw new NoLongerBuilding()
  }
  if (legs.length > 0) {
    await trx
      .insertInto('batch_legs')
      .values(legs.map((l) => ({ batch_id: id, payer_id: l.payerId, payee_id: l.payeeId, amount: l.amount })))
      .onConflict((oc) =>
        oc
          .columns(['batch_id', 'payer_id', 'payee_id'])
          .doUpdateSet({ amount: (eb) => eb('batch_legs.amount', '+', eb.ref('excluded.amount')) }),
      )
      .execute()
  }
  return total
}
