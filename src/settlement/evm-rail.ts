import { getAddress, isAddress, type Address, type TypedDataDomain } from 'viem'
import { receiptDomain } from '../receipts/typed-data.js'
import { ConfigError } from '../config.js'
import type { Store } from '../store/store.js'
import { SYSTEM_ACCOUNTS } from '../store/accounts.js'
import { walletOfPrepaid } from '../store/x402.js'
import type { Batch, Leg } from '../store/settlement.js'
import { evmSettings, operatorFromEnv, publicClientFor, type EvmRailConfig, type EvmSettings } from '../chain/client.js'
import { BatchSender } from '../chain/sender.js'
import { ChainWatcher } from '../chain/watcher.js'
import { TokenProbe } from '../chain/probe.js'
import { X402Relay } from '../chain/x402-relay.js'
import { OutcomeUnknown, type Landed } from '../chain/outcome.js'
import type { ChainLeg } from '../chain/contracts.js'
import type { Blocked, Executed, Rail } from './rail.js'

export interface EvmRailOptions {
  now?: () => number
  log?: (msg: string, err?: unknown) => void
  env?: NodeJS.ProcessEnv
}

/** Why a payer's transfers failed when it was not for want of funds, as the log says it. */
const NOT_FUNDS = {
  payee: 'the token refuses one of its payees',
  payer: 'the token refuses to move its tokens',
  gone: 'its wallet covers them now',
} as const

/**
 * Settlement on an EVM chain: each batch is one BatchSettler transaction moving USDC from payers' wallets (within their
 * allowance) to payees. A failed payer's transfers are its debt only when its wallet does not cover them; a payee or
 * payer the token refuses is no debt: those charges wait, and the operator is told (docs/architecture.md §15.23).
 */
export class EvmRail implements Rail {
  readonly kind = 'evm' as const
  readonly maxLegs: number
  readonly receiptDomain: TypedDataDomain
  /** Where system accounts are paid on chain: the managed vendor has no wallet of its own. */
  readonly systemPayees: Record<string, Address>
  private readonly addresses = new Map<number, Address>()
  /** Accounts of kind `prepaid` among those `addresses` knows. */
  private readonly prepaidIds = new Set<number>()
  /** Payers whose tokens the token would not move (kept in memory: after a restart one batch finds them again). */
  private readonly refusedPayers = new Set<number>()
  /** What the last pass left waiting, so the log tells each change once. */
  private waiting = new Map<string, string>()

  private readonly store: Store
  readonly settings: EvmSettings
  readonly sender: BatchSender
  readonly watcher: ChainWatcher
  private readonly probe: TokenProbe
  private readonly log: (msg: string) => void
  readonly x402: X402Relay | undefined

  constructor({
    store,
    settings,
    sender,
    watcher,
    probe,
    log,
    x402,
  }: {
    store: Store
    settings: EvmSettings
    sender: BatchSender
    watcher: ChainWatcher
    probe: TokenProbe
    log: (msg: string) => void
    x402?: X402Relay
  }) {
    this.x402 = x402
    this.store = store
    this.settings = settings
    this.sender = sender
    this.watcher = watcher
    this.probe = probe
    this.log = log
    this.maxLegs = settings.maxLegs
    this.receiptDomain = receiptDomain({ chainId: settings.chainId, settler: settings.settler })
    const fees = settings.feeAccount ?? sender.operator
    this.systemPayees = { [SYSTEM_ACCOUNTS.fees]: fees, [SYSTEM_ACCOUNTS.vendor]: settings.vendorAccount ?? fees }
  }

  async execute(batch: Batch, legs: Leg[]): Promise<Executed> {
    const chainLegs: ChainLeg[] = []
    const payerIds = new Map<Address, number>()
    /** Prepaid accounts' legs are paid by the settlement contract itself, from what they paid it in advance. */
    const prepaid = new Set<number>()
    for (const l of legs) await this.addressOf(l.payerId)
    // The contract's own legs first (a stable sort: each payer's legs stay adjacent): refunds reach their wallets
    // before any wallet of the batch is collected from.
    const ordered = [...legs].sort((a, b) => Number(this.isPrepaid(b.payerId)) - Number(this.isPrepaid(a.payerId)))
    for (const l of ordered) {
      const payer = await this.payerAddressOf(l.payerId)
      if (this.isPrepaid(l.payerId)) prepaid.add(l.payerId)
      else payerIds.set(payer, l.payerId)
      chainLegs.push({ payer, payee: await this.addressOf(l.payeeId), amount: l.amount })
    }
    let landed: Landed
    try {
      landed = await this.sender.settle(batch, chainLegs)
    } catch (err) {
      if (err instanceof OutcomeUnknown) return { kind: 'unknown', why: err.message }
      throw err
    }
    await this.store.chain.recordMined(batch.id, landed.block, [...payerIds.values()])
    const out = { kind: 'moved' as const, failedPayers: [] as number[], deferredPayers: [] as number[] }
    for (const payer of new Set(landed.failedPayers.map((a) => getAddress(a)))) {
      if (payer === this.settings.settler) {
        // The contract could not pay from its own balance: less than it was paid in advance is there. No payer's
        // fault: the prepaid legs wait (their refunds credited back) and the operator is told.
        this.log(
          `batch ${batch.id}: the settlement contract could not pay the legs of prepaid (x402) accounts from its own balance; they wait, no debt`,
        )
        out.deferredPayers.push(...prepaid)
        continue
      }
      const id = payerIds.get(payer)
      if (id === undefined) continue
      let blame: Awaited<ReturnType<EvmRail['blame']>>
      try {
        blame = await this.blame(
          payer,
          chainLegs.filter((l) => l.payer === payer),
        )
      } catch (err) {
        // The node could not answer the token's questions: the batch waits for a pass that can tell (its landing is
        // stored, nothing is sent again) and the batches after it go on.
        return {
          kind: 'unknown',
          why: `batch ${batch.id}: could not tell why the transfers of payer ${payer} failed (${(err as Error).message})`,
        }
      }
      if (blame === 'funds') out.failedPayers.push(id)
      else {
        if (blame === 'payer') this.refusedPayers.add(id)
        this.log(
          `batch ${batch.id}: the transfers of payer ${payer} failed, not for want of funds (${NOT_FUNDS[blame]}); its charges wait, no debt`,
        )
        out.deferredPayers.push(id)
      }
    }
    return out
  }

  /**
   * Why a payer's transfers failed: a payee or the payer the token refuses whatever the amount, its funds, or neither
   * any more.
   */
  private async blame(payer: Address, legs: ChainLeg[]): Promise<'payee' | 'payer' | 'funds' | 'gone'> {
    const refused = await Promise.all([...new Set(legs.map((l) => l.payee))].map((p) => this.probe.refusesPayee(p)))
    if (refused.some(Boolean)) return 'payee'
    if (await this.probe.refusesLeg(payer, legs[0]!.payee)) return 'payer'
    return (await this.probe.covers(
      payer,
      legs.reduce((s, l) => s + l.amount, 0n),
    ))
      ? 'gone'
      : 'funds'
  }

  /** The payees of due charges the token refuses now, and the payers found refused that still are. */
  async blocked(payees: number[]): Promise<Blocked> {
    const fees = this.systemPayees[SYSTEM_ACCOUNTS.fees]!
    // A question the node cannot answer leaves the account as it stood: a payee is paid (a refusal shows in the batch,
    // which defers its payer), a payer found refused stays so until a pass can tell.
    const out: Blocked = {
      payees: await this.refusing(payees, (a) => this.probe.refusesPayee(a), false),
      payers: await this.refusing(this.refusedPayers, (a) => this.probe.refusesLeg(a, fees), true),
    }
    for (const id of this.refusedPayers) if (!out.payers.includes(id)) this.refusedPayers.delete(id)
    await this.report(out)
    return out
  }

  private async refusing(
    ids: Iterable<number>,
    refuses: (a: Address) => Promise<boolean>,
    unanswered: boolean,
  ): Promise<number[]> {
    const all = [...ids]
    const unasked: string[] = []
    const answers = await Promise.all(
      all.map(async (id) => {
        const address = await this.addressOf(id)
        return refuses(address).catch((err: Error) => {
          unasked.push(`${address} (${err.message})`)
          return unanswered
        })
      }),
    )
    // One line a pass, however many the node could not answer for.
    if (unasked.length)
      this.log(
        `could not ask the token about ${unasked.length} account(s), taken as ${unanswered ? 'still refused' : 'not refused'}: ${unasked.slice(0, 3).join(', ')}${unasked.length > 3 ? ', …' : ''}`,
      )
    return all.filter((_, i) => answers[i])
  }

  /** Tells the operator once when the token starts refusing an account, and once when it stops. */
  private async report(r: Blocked): Promise<void> {
    const now = new Map<string, string>()
    for (const [role, ids] of [
      ['payee', r.payees],
      ['payer', r.payers],
    ] as const) {
      for (const id of ids) now.set(`${role} ${id}`, `${role} ${await this.addressOf(id)}`)
    }
    for (const [k, what] of now)
      if (!this.waiting.has(k)) this.log(`the token refuses ${what}: its charges wait, no debt, until it takes them`)
    for (const [k, what] of this.waiting)
      if (!now.has(k)) this.log(`the token takes ${what} again: its charges go in the next batches`)
    this.waiting = now
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

  private isPrepaid(accountId: number): boolean {
    return this.prepaidIds.has(accountId)
  }

  /** Who pays an account's legs on chain: its wallet, or for a prepaid account the settlement contract itself. */
  private async payerAddressOf(accountId: number): Promise<Address> {
    const address = await this.addressOf(accountId)
    return this.prepaidIds.has(accountId) ? this.settings.settler : address
  }

  /** An account's wallet on chain (a prepaid account's is the wallet that paid: where its refunds go). */
  private async addressOf(accountId: number): Promise<Address> {
    const known = this.addresses.get(accountId)
    if (known) return known
    const account = await this.store.accounts.byId(accountId)
    if (!account) throw new Error(`batch leg names unknown account ${accountId}`)
    if (account.kind === 'prepaid') this.prepaidIds.add(accountId)
    const wallet = walletOfPrepaid(account.address) ?? account.address
    const address =
      this.systemPayees[account.address] ?? (isAddress(wallet, { strict: false }) ? getAddress(wallet) : undefined)
    if (!address) throw new Error(`account ${account.address} has no address on chain`)
    this.addresses.set(accountId, address)
    return address
  }
}

/** Builds the evm rail from the config; the operator key comes from the environment. Checks the node's chain id. */
export async function createEvmRail(rail: EvmRailConfig, store: Store, opts: EvmRailOptions = {}): Promise<EvmRail> {
  const settings = evmSettings(rail)
  const now = opts.now ?? Date.now
  const log = opts.log ?? ((msg, err) => (err === undefined ? console.error(msg) : console.error(msg, err)))
  const operator = operatorFromEnv(settings, opts.env)
  const client = publicClientFor(settings.rpcUrl, settings.chainId, settings.pollMs)
  const chainId = await client.getChainId()
  if (chainId !== settings.chainId)
    throw new ConfigError(
      [`rail.chainId: ${settings.chainId}, but the node at ${settings.rpcUrl} serves chain ${chainId}`],
      'config',
    )
  const sender = new BatchSender({
    client,
    operator,
    store,
    chainId,
    settler: settings.settler,
    confirmations: settings.confirmations,
    pollMs: settings.pollMs,
    bumpAfterMs: settings.bumpAfterMs,
    now,
    log,
  })
  const watcher = new ChainWatcher({
    client,
    store,
    usdc: settings.usdc,
    settler: settings.settler,
    pollMs: settings.pollMs,
    now,
    log,
  })
  const probe = new TokenProbe(client, settings.usdc, settings.settler)
  const x402 =
    rail.x402 &&
    new X402Relay({
      client,
      usdc: settings.usdc,
      settler: settings.settler,
      chainId,
      relayer: rail.x402.relayerKeyEnv
        ? operatorFromEnv({ operatorKeyEnv: rail.x402.relayerKeyEnv }, opts.env)
        : operator,
      maxTimeoutSeconds: rail.x402.maxTimeoutSeconds ?? 300,
      now,
    })
  return new EvmRail({ store, settings, sender, watcher, probe, log, ...(x402 ? { x402 } : {}) })
}
