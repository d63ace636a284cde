import type { Selectable } from 'kysely'
import type { BatchesTable, BatchStatus } from './schema.js'
import { big, bigOrNull, num, numOrNull } from './ints.js'

export interface Batch {
  id: string
  status: BatchStatus
  total: bigint
  createdAt: number
  sentAt: number | null
  settledAt: number | null
  txHash: string | null
  nonce: number | null
  /** Block the batch's transaction was mined in (evm rail). */
  block: bigint | null
  /** Merkle root of the receipts it carries, once fixed (before it is first sent). */
  receiptsRoot: string | null
}

export interface BatchLimits {
  /** Most charges in one batch (default 10 000). */
  maxHolds?: number
  /** Most transfer legs in one batch: a chain transaction has a gas limit. */
  maxLegs?: number
  /**
   * Charges of these payers, and to these payees, wait (the rail refuses them for now); the fee account among the
   * payees holds back every charge with a fee.
   */
  exclude?: { payers: number[]; payees: number[] }
}

/** An account's figures as payee (and as fee account), from its request rows and its written postings. */
export interface PayeeSums {
  /** Captured requests it was paid for, their cost, and its share after fees. */
  requests: number
  gross: bigint
  earned: bigint
  /** Its pending and settled books: the postings derived from posted request rows and those written as rows. */
  pending: bigint
  settled: bigint
}

export interface Leg {
  payerId: number
  payeeId: number
  amount: bigint
}

export function toBatch(
  r: Omit<Selectable<BatchesTable>, 'block_hash' | 'failed_payers' | 'receipts_root'> & {
    receipts_root?: string | null
  },
): Batch {
  return {
    id: r.id,
    status: r.status,
    total: big(r.total),
    createdAt: num(r.created_at),
    sentAt: numOrNull(r.sent_at),
    settledAt: numOrNull(r.settled_at),
    txHash: r.tx_hash,
    nonce: numOrNull(r.nonce),
    block: bigOrNull(r.block),
    receiptsRoot: r.receipts_root ?? null,
  }
}
