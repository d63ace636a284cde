import type { Kysely, Transaction } from 'kysely'
import type { Database } from './schema.js'

/**
 * Every change of a batch's status, each guarded by the status it comes from, so that a replay or a race changes
 * nothing: `building` (its charges being assigned) → `open` → `sent` (its transaction out; sent again while unknown) →
 * `settled`. A pass that finds a batch in another state leaves it as it is.
 */

/** A new batch, building: no settler sends or settles it until it opens. */
export async function beginBuilding(
  trx: Transaction<Database>,
  b: { id: string; total: bigint; now: number },
): Promise<void> {
  await trx
    .insertInto('batches')
    .values({
      id: b.id,
      status: 'building',
      total: b.total,
      created_at: BigInt(b.now),
      sent_at: null,
      settled_at: null,
      tx_hash: null,
      nonce: null,
    })
    .execute()
}

/** Opens the batches left building (all of them, or `id`): from then on they are sent and settled as they are. */
export async function openBuilt(db: Kysely<Database>, id?: string): Promise<void> {
  let q = db.updateTable('batches').set({ status: 'open' }).where('status', '=', 'building')
  if (id !== undefined) q = q.where('id', '=', id)
  await q.execute()
}

/** Records that a batch's transaction went out (again, when it was sent before and its outcome is unknown). */
export async function markSent(
  db: Kysely<Database>,
  s: { batchId: string; txHash: string; nonce: number; now: number },
): Promise<void> {
  await db
    .updateTable('batches')
    .set({ status: 'sent', tx_hash: s.txHash, nonce: s.nonce, sent_at: BigInt(s.now) })
    .where('id', '=', s.batchId)
    .where('status', 'in', ['open', 'sent'])
    .execute()
}

/** Marks an open or sent batch settled; false when it was not (settled already: a replay). */
export async function markSettled(trx: Transaction<Database>, batchId: string, now: number): Promise<boolean> {
  const done = await trx
    .updateTable('batches')
    .set({ status: 'settled', settled_at: BigInt(now) })
    .where('id', '=', batchId)
    .where('status', 'in', ['open', 'sent'])
    .returning('id')
    .executeTakeFirst()
  return done !== undefined
}
