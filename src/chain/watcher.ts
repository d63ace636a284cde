import { setTimeout as sleep } from 'node:timers/promises'
import { getAddress, isAddress, type Address, type PublicClient } from 'viem'
import type { Store } from '../store/store.js'
import { readWallets, usdcAbi } from './contracts.js'

export const WATCHER_LOCK = 'svc-chain-watcher'

export interface WatcherOptions {
  client: PublicClient
  store: Store
  usdc: Address
  settler: Address
  pollMs: number
  now: () => number
  log: (msg: string, err?: unknown) => void
  /** Every this many blocks all payers are read again, whatever the logs said (self-healing). */
  fullSyncBlocks?: number
}

/** Beyond this many new blocks, reading every payer is cheaper than asking for the logs. */
const MAX_LOG_RANGE = 2_000n
/** Wallets read per batched JSON-RPC request. */
const READ_CHUNK = 250

/**
 * Keeps each payer's ledger balance and cap in step with their wallet as blocks arrive, never on the request path: on a
 * block it reads the wallets token events touched, accounts never read and accounts a settled batch changed, and the
 * store brings each account to chain minus owed. Admission stays a store operation on those cached values.
 */
export class ChainWatcher {
  private last: bigint | undefined
  private lastFull: bigint | undefined
  private readonly dirty = new Set<number>()
  private readonly ac = new AbortController()
  private loop: Promise<void> | undefined
  private queue: Promise<unknown> = Promise.resolve()
  private readonly fullSyncBlocks: bigint

  constructor(private readonly o: WatcherOptions) {
    this.fullSyncBlocks = BigInt(o.fullSyncBlocks ?? 50)
  }

  /** The last block the wallets were read at. */
  get block(): bigint | undefined {
    return this.last
  }

  start(): void {
    this.loop ??= this.run()
  }

  async stop(): Promise<void> {
    this.ac.abort()
    await this.loop
    await this.queue.catch(() => {})
  }

  /** Marks accounts to read again on the next tick (their owed amount changed without a token event). */
  touch(accountIds: Iterable<number>): void {
    for (const id of accountIds) this.dirty.add(id)
  }

  /** Runs one round now, after any round in progress; resolves with the block it read at (undefined if skipped). */
  syncNow(): Promise<bigint | undefined> {
    const next = this.queue.then(() => this.tick())
    this.queue = next.catch(() => {})
    return next
  }

  /** Whether the watcher is being stopped (read anew: it changes while a read is awaited). */
  private stopping(): boolean {
    return this.ac.signal.aborted
  }

  private async run(): Promise<void> {
    let failing = false
    while (!this.ac.signal.aborted) {
      try {
        await this.syncNow()
        if (failing) this.o.log('chain watcher reads the chain again')
        failing = false
      } catch (err) {
        // Once per outage, not once per poll: admission keeps working on the last values read.
        if (!failing && !this.stopping())
          this.o.log('chain watcher cannot read the chain; balances stay as last read', err)
        failing = true
      }
      await sleep(this.o.pollMs, undefined, { signal: this.ac.signal }).catch(() => {})
    }
  }

  private async tick(): Promise<bigint | undefined> {
    const head = await this.o.client.getBlockNumber({ cacheTime: 0 })
    if (this.last !== undefined && head <= this.last && this.dirty.size === 0) return this.last
    const lock = await this.o.store.tryLock(WATCHER_LOCK)
    if (!lock) return undefined
    const dirty = [...this.dirty]
    this.dirty.clear()
    try {
      const full =
        this.last === undefined ||
        this.lastFull === undefined ||
        head - this.lastFull >= this.fullSyncBlocks ||
        head - this.last > MAX_LOG_RANGE
      const targets = new Map<number, string>()
      const add = (rows: { id: number; address: string }[]) => rows.forEach((r) => targets.set(r.id, r.address))
      if (full) add(await this.o.store.chain.payers())
      else {
        if (head > this.last!) add(await this.o.store.chain.payers(await this.touchedBetween(this.last! + 1n, head)))
        add(await this.o.store.chain.unsynced())
        for (const id of dirty) {
          const a = await this.o.store.accounts.byId(id)
          if (a?.kind === 'user') targets.set(a.id, a.address)
        }
      }
      await this.syncAccounts(targets, head)
      this.last = head
      if (full) this.lastFull = head
      return head
    } catch (err) {
      this.touch(dirty)
      throw err
    } finally {
      await lock.release()
    }
  }

  /** Owners whose balance or allowance to the settler token events changed in [from, to]. */
  private async touchedBetween(from: bigint, to: bigint): Promise<string[]> {
    const events = await this.o.client.getContractEvents({
      address: this.o.usdc,
      abi: usdcAbi,
      fromBlock: from,
      toBlock: to,
      strict: true,
    })
    const out = new Set<string>()
    for (const e of events) {
      if (e.eventName === 'Transfer') {
        out.add(e.args.from)
        out.add(e.args.to)
      } else if (e.eventName === 'Approval' && e.args.spender === this.o.settler) out.add(e.args.owner)
      // An authorization used moves USDC with a Transfer of its own; one canceled moves nothing.
    }
    return [...out]
  }

  private async syncAccounts(targets: Map<number, string>, head: bigint): Promise<void> {
    const entries = [...targets].filter(([, address]) => isAddress(address, { strict: false }))
    for (let start = 0; start < entries.length; start += READ_CHUNK) {
      const chunk = entries.slice(start, start + READ_CHUNK)
      const wallets = await readWallets({
        client: this.o.client,
        usdc: this.o.usdc,
        settler: this.o.settler,
        wallets: chunk.map(([, a]) => getAddress(a)),
        block: head,
      })
      const now = this.o.now()
      for (const [i, [id]] of chunk.entries()) {
        const r = await this.o.store.chain.sync(id, { ...wallets[i]!, block: head }, `chain_${head}_${id}`, now)
        // Older than a batch mined for this payer (a lagging node): read it again next round.
        if (r.kind === 'stale') this.dirty.add(id)
      }
    }
  }
}
