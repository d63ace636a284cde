import {
  createWalletClient,
  custom,
  getAddress,
  type Address,
  type Chain,
  type Hash,
  type PublicClient,
  type Transport,
  type WalletClient,
} from 'viem'
import type { Account, LocalAccount } from 'viem/accounts'
import { BatchSettler, TestUSDC } from './artifacts.js'
import { usdcAbi } from './contracts.js'

/** Contract deployment and the few token calls the CLI, the demo and the tests make. */

export type Wallet = WalletClient<Transport, Chain, Account>

/** A wallet signing locally with `account` and sending through the read client's connection. */
export function walletFor(client: PublicClient, account: LocalAccount): Wallet {
  if (!client.chain) throw new Error('the client has no chain')
  return createWalletClient({
    account,
    chain: client.chain,
    transport: custom({ request: (args) => client.request(args as never) }),
  })
}

async function mined(client: PublicClient, hash: Hash, what: string) {
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })
  if (receipt.status !== 'success') throw new Error(`${what} reverted (${hash})`)
  return receipt
}

/** Deploys the test token (6 decimals, permit; the deployer may mint). */
export async function deployTestUsdc(client: PublicClient, wallet: Wallet): Promise<Address> {
  const hash = await wallet.deployContract({ abi: TestUSDC.abi, bytecode: TestUSDC.bytecode })
  return getAddress((await mined(client, hash, 'TestUSDC deployment')).contractAddress!)
}

/** Deploys a BatchSettler for `usdc` whose only sender is `operator`. */
export async function deploySettler(
  client: PublicClient,
  wallet: Wallet,
  usdc: Address,
  operator: Address,
): Promise<Address> {
  const hash = await wallet.deployContract({
    abi: BatchSettler.abi,
    bytecode: BatchSettler.bytecode,
    args: [usdc, operator],
  })
  return getAddress((await mined(client, hash, 'BatchSettler deployment')).contractAddress!)
}

export async function mintUsdc({
  client,
  minter,
  usdc,
  to,
  amount,
}: {
  client: PublicClient
  minter: Wallet
  usdc: Address
  to: Address
  amount: bigint
}): Promise<void> {
  await mined(
    client,
    await minter.writeContract({ address: usdc, abi: usdcAbi, functionName: 'mint', args: [to, amount] }),
    'mint',
  )
}

/** Sets the payer's allowance to the settler: their spending cap on the evm rail. */
export async function approveSettler({
  client,
  payer,
  usdc,
  settler,
  amount,
}: {
  client: PublicClient
  payer: Wallet
  usdc: Address
  settler: Address
  amount: bigint
}): Promise<bigint> {
  const receipt = await mined(
    client,
    await payer.writeContract({ address: usdc, abi: usdcAbi, functionName: 'approve', args: [settler, amount] }),
    'approve',
  )
  return receipt.blockNumber
}

export async function usdcBalance(client: PublicClient, usdc: Address, owner: Address): Promise<bigint> {
  return client.readContract({ address: usdc, abi: usdcAbi, functionName: 'balanceOf', args: [owner] })
}

export interface Deployment {
  chainId: number
  usdc: Address
  /** True when the test token was deployed now (local chains); false when an existing USDC is used. */
  usdcDeployed: boolean
  settler: Address
  operator: Address
}

/**
 * Deploys what the evm rail needs: the test token when no USDC is given (local chains only, where a token of no
 * value is what one wants) and a BatchSettler whose operator is `operator` (default: the deployer).
 */
export async function deployRail(
  client: PublicClient,
  deployer: Wallet,
  opts: { usdc?: Address; operator?: Address },
): Promise<Deployment> {
  const chainId = await client.getChainId()
  const usdc = opts.usdc ?? (await deployTestUsdc(client, deployer))
  const operator = opts.operator ?? deployer.account.address
  const settler = await deploySettler(client, deployer, usdc, operator)
  return { chainId, usdc, usdcDeployed: opts.usdc === undefined, settler, operator }
}
