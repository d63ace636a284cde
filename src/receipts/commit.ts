import { setImmediate as nextTurn } from 'node:timers/promises'
import type { Hex, TypedDataDomain } from 'viem'
import type { ReceiptsRepo } from '../store/receipts.js'
import { merkleRoot } from './merkle.js'
import { receiptDigest } from './typed-data.js'
import { wireReceipt } from './wire.js'

/** Receipts hashed per turn of the event loop while a batch's root is built: a gateway keeps serving meanwhile. */
const DIGESTS_PER_TURN = 200

/**
 * The receipts root of a batch: fixed from the charges it carries the first time it is asked for (before the batch is
 * first sent), the stored one after. Leaves are the receipts' EIP-712 digests in request id order.
 */
export async function commitReceipts(receipts: ReceiptsRepo, domain: TypedDataDomain, batchId: string): Promise<Hex> {
  const records = await receipts.ofBatch(batchId)
  if (records.length === 0) throw new Error(`batch ${batchId} carries no charges to commit receipts of`)
  const leaves: { requestId: string; leaf: Hex }[] = []
  for (const r of records) {
    if (leaves.length % DIGESTS_PER_TURN === DIGESTS_PER_TURN - 1) await nextTurn()
    leaves.push({ requestId: r.requestId, leaf: receiptDigest(domain, wireReceipt(r)) })
  }
  return (await receipts.commit(batchId, merkleRoot(leaves.map((l) => l.leaf)), leaves)) as Hex
}
