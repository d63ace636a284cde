import { getAddress, isAddress, type Address } from 'viem'
import { ConfigError } from '../config.js'
import type { Store } from '../store/store.js'
import { SYSTEM_ACCOUNTS } from '../store/accounts.js'
import type { Batch, Leg } from '../store/settlement.js'
import { evmSettings, operatorFromEnv, publicClientFor, type EvmRailConfig, type EvmSettings } from '../chain/client.js'
import { BatchSender } from '../chain/sender.js'
import { ChainWatcher } from '../chain/watcher.js'
import type { ChainLeg } from '../chain/contracts.js'
import type { Executed, Rail } from './rail.js'

export interface EvmRailOptions {
  now?: () => number
  log?: (msg: string, err?: unknown) => void
  env?: NodeJS.ProcessEnv
}

/**
 * Settlement on an EVM chain: each batch is one BatchSettler transaction that moves USDC from payers' wallets
 * (within their allowance to the settler) to providers, the fee account and the vendor account. Payers whose
 * transfers fail are reported back so the ledger records their debt; the rest of the batch is settled.
 */
export class EvmRail implements Rail {
  readonly kind = 'evm' as const
  readonly maxLegs: number
  /** Where system accounts are paid on chain: the managed vendor has no wallet of its own. */
  readonly systemPayees: Record<string, Address>
  private readonly addresses = new Map<number, Address>()

  constructor(private readonly store: Store, readonly settings: EvmSettings, readonly sender: BatchSender, readonly watcher: ChainWatcher) {
    this.maxLegs = settings.maxLegs
    const fees = settings.feeAccount ?? sender.operator
    this.systemPayees = { [SYSTEM_ACCOUNTS.fees]: fees, [SYSTEM_ACCOUNTS.vendor]: settings.vendorAccount ?? fees }
  }

  async execute(batch: Batch, legs: Leg[]): Promise<Executed> {
    const chainLegs: ChainLeg[] = []
    const payerIds = new Map<Address, number>()
    for (const l of legs) {
      const payer = await this.addressOf(l.payerId)
      payerIds.set(payer, l.payerId)
      chainLegs.push({ payer, payee: await this.addressOf(l.payeeId), amount: l.amount })
    }
    const landed = await this.sender.settle(batch, chainLegs)
    await this.store.chain.recordMined(batch.id, landed.block, [...payerIds.values()])
    const failedPayers = landed.failedPayers.map((a) => payerIds.get(getAddress(a))).filter((id): id is number => id !== undefined)
    return { failedPayers }
  }

  /** What the batch's payers owe changed: the watcher reads their wallets again. */
  async afterSettled(_batch: Batch, legs: Leg[]): Promise<void> {
    this.watcher.touch(new Set(legs.map((l) => l.payerId)))
  }

  async start(): Promise<void> {
    this.watcher.start()
  }

  async close(): Promise<void> {
    this.sender.close()
    await this.watcher.stop()
  }

  private async addressOf(accountId: number): Promise<Address> {
    const known = this.addresses.get(accountId)
    if (known) return known
    const account = await this.store.accounts.byId(accountId)
    if (!account) throw new Error(`batch leg names unknown account ${accountId}`)
    const address = this.systemPayees[account.address] ?? (isAddress(account.address, { strict: false }) ? getAddress(account.address) : undefined)
    if (!address) throw new Error(`account ${account.address} has no address on chain`)
    this.addresses.set(accountId, address)
    return address
  }
}

/** Builds the evm rail from the config; the operator key comes from the environment. Checks the node's chain id. */
export async function createEvmRail(rail: EvmRailConfig, store: Store, opts: EvmRailOptions = {}): Promise<EvmRail> {
  const settings = evmSettings(rail)
  const now = opts.now ?? Date.now
  const log = opts.log ?? ((msg, err) => console.error(msg, err ?? ''))
  const operator = operatorFromEnv(settings, opts.env)
  const client = publicClientFor(settings.rpcUrl, settings.chainId, settings.pollMs)
  const chainId = await client.getChainId()
  if (chainId !== settings.chainId) throw new ConfigError([`rail.chainId: ${settings.chainId}, but the node at ${settings.rpcUrl} serves chain ${chainId}`], 'config')
  const sender = new BatchSender({
    client, operator, store, chainId, settler: settings.settler, confirmations: settings.confirmations,
    pollMs: settings.pollMs, bumpAfterMs: settings.bumpAfterMs, now, log,
  })
  const watcher = new ChainWatcher({ client, store, usdc: settings.usdc, settler: settings.settler, pollMs: settings.pollMs, now, log })
  return new EvmRail(store, settings, sender, watcher)
}
