import { keccak256, stringToHex, type Address, type Hex, type PublicClient } from 'viem'
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

/** The contract's id of a ledger batch. */
export function batchKey(batchId: string): Hex {
  return keccak256(stringToHex(batchId))
}

/** Balance and allowance to the settler of each wallet at one block (one batched JSON-RPC request). */
export async function readWallets({
  client,
  usdc,
  settler,
  wallets,
  block,
}: {
  client: PublicClient
  usdc: Address
  settler: Address
  wallets: Address[]
  block: bigint
}): Promise<{ balance: bigint; allowance: bigint }[]> {
  return Promise.all(
    wallets.map(async (owner) => {
      const [balance, allowance] = await Promise.all([
        client.readContract({
          address: usdc,
          abi: usdcAbi,
          functionName: 'balanceOf',
          args: [owner],
          blockNumber: block,
        }),
        client.readContract({
          address: usdc,
          abi: usdcAbi,
          functionName: 'allowance',
          args: [owner, settler],
          blockNumber: block,
        }),
      ])
      return { balance, allowance }
    }),
  )
}
