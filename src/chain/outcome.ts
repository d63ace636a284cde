import {
  BaseError,
  parseEventLogs,
  type Address,
  type Hex,
  type Log,
  type PublicClient,
  type TransactionReceipt,
} from 'viem'
import { batchKey, settlerAbi } from './contracts.js'

/** Where a batch's transaction landed, and which payers the contract could not collect. */
export interface Landed {
  txHash: Hex
  block: bigint
  /** The block at that height: a reorg replaces it, and then the outcome is read again. */
  blockHash: Hex
  failedPayers: Address[]
}

/** What is known of a batch besides the chain: its outcome as seen when it was mined, and its transactions. */
export interface Known {
  landed?: Landed | null
  txHashes?: readonly Hex[]
}

/** The chain executed a batch, but the node keeps none of the history that tells which payers it collected. */
export class OutcomeUnknown extends Error {}

/**
 * The outcome of a batch in the logs of one transaction (or one block); null when they do not hold its BatchSettled.
 */
function fromLogs(logs: Log[], key: Hex, at: { txHash?: Hex; block: bigint; blockHash: Hex }): Landed | null {
  const parsed = parseEventLogs({ abi: settlerAbi, logs }).filter((l) => l.args.batchId === key)
  const settled = parsed.find((l) => l.eventName === 'BatchSettled')
  if (!settled) return null
  const failedPayers = parsed.flatMap((l) => (l.eventName === 'PayerFailed' ? [l.args.payer] : []))
  return { txHash: at.txHash ?? settled.transactionHash!, block: at.block, blockHash: at.blockHash, failedPayers }
}

/** The outcome of a batch from the receipt of the transaction that executed it; null when it did not. */
export function landedFromReceipt(receipt: TransactionReceipt, key: Hex): Landed | null {
  if (receipt.status !== 'success') return null
  return fromLogs(receipt.logs, key, {
    txHash: receipt.transactionHash,
    block: receipt.blockNumber,
    blockHash: receipt.blockHash,
  })
}

/**
 * Finds the transaction that executed a batch id and its outcome; null when none did. OutcomeUnknown when the node no
 * longer has the outcome: it is taken from what was seen when the batch was mined while that block is still the
 * chain's, else from the logs, the transaction's receipt or the block's receipts (docs/architecture.md §15.34).
 */
export async function findExecuted(
  client: PublicClient,
  settler: Address,
  batchId: string,
  known: Known = {},
): Promise<Landed | null> {
  const key = batchKey(batchId)
  const block = await client.readContract({
    address: settler,
    abi: settlerAbi,
    functionName: 'executedAt',
    args: [key],
  })
  if (block === 0n) return null
  const { hash: blockHash } = await client.getBlock({ blockNumber: block })
  if (known.landed && known.landed.block === block && known.landed.blockHash === blockHash) return known.landed
  const at = { block, blockHash: blockHash! }
  const sources = [
    async () =>
      fromLogs(
        await client.getContractEvents({
          address: settler,
          abi: settlerAbi,
          args: { batchId: key },
          blockHash: at.blockHash,
        }),
        key,
        at,
      ),
    ...(known.txHashes ?? []).map((hash) => async () => {
      const receipt = await client.getTransactionReceipt({ hash })
      return receipt.blockHash === at.blockHash ? landedFromReceipt(receipt, key) : null
    }),
    async () => {
      const receipts = await client.getBlockReceipts({ blockHash: at.blockHash })
      return receipts.map((r) => landedFromReceipt(r, key)).find((l) => l !== null) ?? null
    },
  ]
  const errors: string[] = []
  for (const source of sources) {
    const landed = await source().catch(
      (err: unknown) => void errors.push(err instanceof BaseError ? err.details || err.shortMessage : String(err)),
    )
    if (landed) return landed
  }
  throw new OutcomeUnknown(
    `batch ${batchId} was executed in block ${block}, but the node tells neither its logs nor its receipts (pruned history?${errors.length ? ` ${errors.join('; ')}` : ''}): ` +
      "which payers it collected is unknown, so it stays unsettled. Point rail.rpcUrl at a node that keeps that block's history (an archive node); later batches go on meanwhile",
  )
}
