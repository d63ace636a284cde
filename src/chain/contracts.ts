import { keccak256, parseEventLogs, stringToHex, type Address, type Hex, type PublicClient, type TransactionReceipt } from 'viem'
import { BatchSettler, TestUSDC } from './artifacts.js'

/** The ERC-20 part of the test token's ABI also describes Circle's USDC (balanceOf, allowance, Transfer, Approval). */
export const usdcAbi = TestUSDC.abi
export const settlerAbi = BatchSettler.abi

/** One transfer of a batch on chain. Legs of one payer are adjacent (the contract settles per payer group). */
export interface ChainLeg {
  payer: Address
  payee: Address
  amount: bigint
}

/** Where a batch's transaction landed, and which payers the contract could not collect. */
export interface Landed {
  txHash: Hex
  block: bigint
  failedPayers: Address[]
}

/** The contract's id of a ledger batch. */
export function batchKey(batchId: string): Hex {
  return keccak256(stringToHex(batchId))
}

/** Balance and allowance to the settler of each wallet at one block (one batched JSON-RPC request). */
export async function readWallets(
  client: PublicClient, usdc: Address, settler: Address, wallets: Address[], block: bigint,
): Promise<{ balance: bigint; allowance: bigint }[]> {
  return Promise.all(wallets.map(async (owner) => {
    const [balance, allowance] = await Promise.all([
      client.readContract({ address: usdc, abi: usdcAbi, functionName: 'balanceOf', args: [owner], blockNumber: block }),
      client.readContract({ address: usdc, abi: usdcAbi, functionName: 'allowance', args: [owner, settler], blockNumber: block }),
    ])
    return { balance, allowance }
  }))
}

/** The outcome of a batch from the receipt of the transaction that executed it; null when it did not. */
export function landedFromReceipt(receipt: TransactionReceipt, key: Hex): Landed | null {
  if (receipt.status !== 'success') return null
  const logs = parseEventLogs({ abi: settlerAbi, logs: receipt.logs })
  if (!logs.some((l) => l.eventName === 'BatchSettled' && l.args.batchId === key)) return null
  const failedPayers = logs.flatMap((l) => (l.eventName === 'PayerFailed' && l.args.batchId === key ? [l.args.payer] : []))
  return { txHash: receipt.transactionHash, block: receipt.blockNumber, failedPayers }
}

/** Finds the transaction that executed a batch id, whichever of our transactions it was; null when none did. */
export async function findExecuted(client: PublicClient, settler: Address, key: Hex): Promise<Landed | null> {
  const at = await client.readContract({ address: settler, abi: settlerAbi, functionName: 'executedAt', args: [key] })
  if (at === 0n) return null
  const events = await client.getContractEvents({ address: settler, abi: settlerAbi, args: { batchId: key }, fromBlock: at, toBlock: at, strict: true })
  const settled = events.find((e) => e.eventName === 'BatchSettled')
  if (!settled) throw new Error(`batch ${key} executed in block ${at} but its event is missing`)
  const failedPayers = events.flatMap((e) => (e.eventName === 'PayerFailed' ? [e.args.payer] : []))
  return { txHash: settled.transactionHash, block: at, failedPayers }
}
