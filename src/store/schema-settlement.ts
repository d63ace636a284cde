import type { Generated } from 'kysely'

/** Table types of settlement: batches, their legs and receipts, and the chain watcher's view of wallets. */

/** `building` while its charges are assigned (batch-build.ts): no settler sends or settles it before it opens. */
export type BatchStatus = 'building' | 'open' | 'sent' | 'settled' | 'failed'

export interface BatchesTable {
  id: string
  status: BatchStatus
  total: bigint
  created_at: bigint
  sent_at: bigint | null
  settled_at: bigint | null
  tx_hash: string | null
  nonce: number | null
  /** Block the batch's transaction was mined in (evm rail). */
  block: bigint | null
  /** Hash of that block, set when the transaction was seen mined: a reorg replaces the block at that height. */
  block_hash: string | null
  /** JSON array of the payer addresses the contract reported failed, as seen when the transaction was mined. */
  failed_payers: string | null
  /** Merkle root (hex) of the receipts of the charges the batch carries, fixed before it is first sent. */
  receipts_root: string | null
}

/** The leaves of a batch's receipts root, in order: one per charge the batch carried when the root was fixed. */
export interface BatchReceiptsTable {
  batch_id: string
  position: number
  request_id: string
  leaf: string
}

/** One transfer of a batch: payer → payee. */
export interface BatchLegsTable {
  batch_id: string
  payer_id: number
  payee_id: number
  amount: bigint
  /**
   * 1 when the payer's transfers failed on the rail (the amount became its debt, or its charges wait for a later
   * batch).
   */
  failed: Generated<number>
}

/** A wallet's on-chain USDC balance and allowance to the settler, as last read by the chain watcher. */
export interface ChainWalletsTable {
  account_id: number
  balance: bigint
  allowance: bigint
  block: bigint
  floor: Generated<bigint>
  synced_at: bigint
}
