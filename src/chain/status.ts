import { formatEther, getAddress, type Address } from 'viem'
import type { Store } from '../store/store.js'
import { formatUsdc } from '../money/usdc.js'
import { evmSettings, operatorFromEnv, publicClientFor, type EvmRailConfig } from './client.js'
import { settlerAbi, usdcAbi } from './contracts.js'

/** What `svc chain status` shows: the chain, the contracts, the operator, where fees go, and what is unsettled. */
export async function chainStatus(rail: EvmRailConfig, store: Store, env: NodeJS.ProcessEnv = process.env) {
  const s = evmSettings(rail)
  const client = publicClientFor(s.rpcUrl, s.chainId)
  const [nodeChainId, head, settlerCode] = await Promise.all([
    client.getChainId(),
    client.getBlockNumber(),
    client.getCode({ address: s.settler }),
  ])
  const deployed = settlerCode !== undefined && settlerCode !== '0x'
  const [symbol, settlerOperator, settlerToken] = await Promise.all([
    client.readContract({ address: s.usdc, abi: usdcAbi, functionName: 'symbol' }).catch(() => null),
    deployed ? client.readContract({ address: s.settler, abi: settlerAbi, functionName: 'operator' }) : null,
    deployed ? client.readContract({ address: s.settler, abi: settlerAbi, functionName: 'token' }) : null,
  ])
  let keyAddress: Address | null = null
  let keyProblem: string | null = null
  try {
    keyAddress = operatorFromEnv(s, env).address
  } catch (err) {
    // One line, as every problem is (the config's own errors list their fields on lines of their own).
    keyProblem = (err as Error).message
      .split('\n')
      .map((l) => l.trim().replace(/^- /, ''))
      .filter(Boolean)
      .join(' ')
  }
  const operator = keyAddress ?? settlerOperator
  const fees = s.feeAccount ?? operator
  const vendor = s.vendorAccount ?? fees
  const usdcOf = async (a: Address | null) =>
    a
      ? formatUsdc(await client.readContract({ address: s.usdc, abi: usdcAbi, functionName: 'balanceOf', args: [a] }))
      : null
  const pending = await store.settlement.batches(['building', 'open', 'sent'])
  const problems = [
    nodeChainId !== s.chainId ? `the node serves chain ${nodeChainId}, the config says ${s.chainId}` : null,
    !deployed ? `no contract at the settler address ${s.settler}` : null,
    settlerToken && getAddress(settlerToken) !== s.usdc
      ? `the settler moves token ${settlerToken}, the config says ${s.usdc}`
      : null,
    keyAddress && settlerOperator && keyAddress !== settlerOperator
      ? `the key in ${s.operatorKeyEnv} is ${keyAddress}, but the settler's operator is ${settlerOperator}`
      : null,
    keyProblem,
  ].filter((p): p is string => p !== null)
  return {
    chain_id: s.chainId,
    rpc_url: s.rpcUrl,
    head_block: head.toString(),
    watcher_block: (await store.chain.lastSyncedBlock())?.toString() ?? null,
    usdc: { address: s.usdc, symbol },
    settler: { address: s.settler, deployed, operator: settlerOperator },
    operator: operator && {
      address: operator,
      key_env: s.operatorKeyEnv,
      eth: formatEther(await client.getBalance({ address: operator })),
    },
    fee_account: { address: fees, usdc: await usdcOf(fees) },
    vendor_account: { address: vendor, usdc: await usdcOf(vendor) },
    confirmations: s.confirmations,
    pending_batches: pending.map((b) => ({
      id: b.id,
      status: b.status,
      total: formatUsdc(b.total),
      tx_hash: b.txHash,
      nonce: b.nonce,
    })),
    settled_batches: await store.settlement.countBatches(['settled']),
    debtors: (await store.chain.debtors()).map((d) => ({ wallet: d.address, debt: formatUsdc(d.debt) })),
    problems,
  }
}

export type ChainStatus = Awaited<ReturnType<typeof chainStatus>>

/**
 * A wallet as the portal's wallet page shows it on the evm rail: its USDC and allowance as last read from the chain,
 * what it owes, and which contract to approve. Read from the store only (the watcher keeps it fresh).
 */
export async function walletOnChain(rail: EvmRailConfig, store: Store, accountId: number) {
  const s = evmSettings(rail)
  const [wallet, owed] = await Promise.all([store.chain.wallet(accountId), store.chain.owed(accountId)])
  return {
    chain_id: s.chainId,
    usdc: s.usdc,
    approve: s.settler,
    onchain_balance: wallet ? formatUsdc(wallet.balance) : null,
    allowance: wallet ? formatUsdc(wallet.allowance) : null,
    owed: formatUsdc(owed),
    read_at_block: wallet ? wallet.block.toString() : null,
  }
}
