import { setTimeout as sleep } from 'node:timers/promises'
import { encodeFunctionData, keccak256, type Address, type Hex, type PublicClient, type TransactionReceipt } from 'viem'
import type { LocalAccount } from 'viem/accounts'
import type { Store } from '../store/store.js'
import { batchKey, settlerAbi, type ChainLeg } from './contracts.js'
import { findExecuted, landedFromReceipt, type Landed } from './outcome.js'

export interface SenderOptions {
  client: PublicClient
  operator: LocalAccount
  store: Store
  chainId: number
  settler: Address
  confirmations: number
  pollMs: number
  bumpAfterMs: number
  now: () => number
  log: (msg: string, err?: unknown) => void
}

/** One signed transaction of a batch: the same nonce is reused by every fee bump. */
interface Signed {
  hash: Hex
  nonce: number
  gas: bigint
  maxFeePerGas: bigint
  maxPriorityFeePerGas: bigint
  /** The node took it (a refused broadcast replaces nothing and is nothing to bump). */
  accepted: boolean
}

/** Fee bump of a stuck transaction: nodes accept a replacement at ≥ +10 %; +25 % clears that with room. */
const BUMP_NUM = 125n
const BUMP_DEN = 100n

/**
 * Sends batch transactions from the single operator account. Each transaction is signed locally and its hash and
 * nonce are stored before it is broadcast, so a restart at any point finds it (by hash, or by the batch id the
 * contract records) and never pays a batch twice: the contract refuses a batch id it executed.
 */
export class BatchSender {
  private readonly ac = new AbortController()

  constructor(private readonly o: SenderOptions) {}

  get operator(): Address {
    return this.o.operator.address
  }

  /** Abandons waits; the batch stays `sent` and the next pass resumes it. */
  close(): void {
    this.ac.abort()
  }

  /**
   * Gets the batch executed and confirmed on chain: resumes what an earlier run sent, sends otherwise, bumps when
   * stuck. Where and how it landed is stored as soon as it is seen mined, so that confirming it, then or after a
   * restart, needs only what every node keeps (the contract's state and block headers), not its logs.
   */
  async settle(
    batch: { id: string; txHash: string | null; nonce: number | null; receiptsRoot: string | null },
    legs: ChainLeg[],
  ): Promise<Landed> {
    const key = batchKey(batch.id)
    if (!batch.receiptsRoot) throw new Error(`batch ${batch.id} has no receipts root to commit to`)
    const data = encodeFunctionData({
      abi: settlerAbi,
      functionName: 'settle',
      args: [key, batch.receiptsRoot as Hex, legs],
    })
    const seen = (await this.o.store.chain.landed(batch.id)) as Landed | null
    const known = { landed: seen, txHashes: batch.txHash ? [batch.txHash as Hex] : [] }
    const landed =
      (await findExecuted(this.o.client, this.o.settler, batch.id, known)) ??
      (await this.land(batch, key, data, legs.length))
    await this.o.store.chain.recordLanded(batch.id, landed)
    await this.waitForBlock(landed.block + BigInt(this.o.confirmations))
    // A reorg may have dropped or moved the transaction while we waited: then the next pass sends it again or confirms
    // it where it is.
    const still = await findExecuted(this.o.client, this.o.settler, batch.id, { landed })
    if (!still || still.blockHash !== landed.blockHash)
      throw new Error(
        `batch ${batch.id} was reorganised away while confirming; the next pass finds it again or sends it again`,
      )
    return still
  }

  private async land(
    batch: { id: string; txHash: string | null; nonce: number | null },
    key: Hex,
    data: Hex,
    legs: number,
  ): Promise<Landed> {
    let hashes: Hex[] = []
    let current =
      batch.txHash && batch.nonce !== null
        ? await this.resume({ batchId: batch.id, hash: batch.txHash as Hex, nonce: batch.nonce, data, legs })
        : null
    /** The latest transaction at this nonce the node took: what a bump must outbid. */
    let taken = current?.accepted ? current : null
    if (current) hashes.push(current.hash)
    let reverted = 0
    for (;;) {
      this.ac.signal.throwIfAborted()
      if (!current) {
        current = await this.sendNew(batch.id, data, legs)
        taken = current.accepted ? current : null
        hashes.push(current.hash)
      }
      const receipt = await this.waitMined(hashes)
      if (receipt) {
        const landed =
          landedFromReceipt(receipt, key) ??
          (await findExecuted(this.o.client, this.o.settler, batch.id, { txHashes: hashes }))
        if (landed) return landed
        // Reverted without executing the batch (e.g. out of gas): one fresh attempt, then the error is the pass's.
        if (++reverted > 1)
          throw new Error(`the transaction ${receipt.transactionHash} of batch ${batch.id} reverted twice`)
        this.o.log(`batch ${batch.id}: transaction ${receipt.transactionHash} reverted; sending a new one`)
        current = null
        hashes = []
        continue
      }
      const executed = await findExecuted(this.o.client, this.o.settler, batch.id, { txHashes: hashes })
      if (executed) return executed
      const used = await this.o.client.getTransactionCount({ address: this.operator, blockTag: 'latest' })
      // Our nonce was taken by a transaction that is not ours for this batch: start over with a fresh nonce.
      if (used > current.nonce) current = null
      else {
        // Only a transaction the node took is bumped. Bumping refused ones (the operator out of gas money, the node
        // refusing calls) would raise the fee by a quarter at every try, for nothing, until the batch finally paid
        // it: until one is taken, the same nonce goes again at fresh fees.
        current = taken
          ? await this.bump(batch.id, data, taken)
          : await this.sendAt(batch.id, data, legs, current.nonce)
        if (current.accepted) taken = current
        hashes.push(current.hash)
      }
    }
  }

  /**
   * What an earlier run stored for a sent batch: its transaction if the node knows it, a re-signed one if it was lost.
   */
  private async resume({
    batchId,
    hash,
    nonce,
    data,
    legs,
  }: {
    batchId: string
    hash: Hex
    nonce: number
    data: Hex
    legs: number
  }): Promise<Signed | null> {
    // A node may answer with a legacy transaction, which has no EIP-1559 fees, whatever the types say.
    const tx = (await this.o.client.getTransaction({ hash }).catch(() => null)) as
      | (Omit<Awaited<ReturnType<typeof this.o.client.getTransaction>>, 'maxFeePerGas' | 'maxPriorityFeePerGas'> & {
          maxFeePerGas?: bigint
          maxPriorityFeePerGas?: bigint
        })
      | null
    if (tx && tx.maxFeePerGas !== undefined && tx.maxPriorityFeePerGas !== undefined) {
      return {
        hash,
        nonce: tx.nonce,
        gas: tx.gas,
        maxFeePerGas: tx.maxFeePerGas,
        maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
        accepted: true,
      }
    }
    // Stored but never broadcast (or dropped): send again with the same nonce while it is still free.
    const used = await this.o.client.getTransactionCount({ address: this.operator, blockTag: 'latest' })
    if (used > nonce) return null
    this.o.log(`batch ${batchId}: transaction ${hash} is unknown to the node; sending it again`)
    return this.sendAt(batchId, data, legs, nonce)
  }

  private async sendNew(batchId: string, data: Hex, legs: number): Promise<Signed> {
    return this.sendAt(
      batchId,
      data,
      legs,
      await this.o.client.getTransactionCount({ address: this.operator, blockTag: 'pending' }),
    )
  }

  /** Signs and sends the batch at `nonce` with fresh fee and gas estimates. */
  private async sendAt(batchId: string, data: Hex, legs: number, nonce: number): Promise<Signed> {
    const [fees, gas] = await Promise.all([this.o.client.estimateFeesPerGas(), this.estimateGas(data, legs)])
    return this.signAndSend(batchId, data, {
      nonce,
      gas,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    })
  }

  private async bump(batchId: string, data: Hex, prev: Signed): Promise<Signed> {
    const fees = await this.o.client.estimateFeesPerGas()
    const up = (v: bigint, fresh: bigint) => {
      const bumped = (v * BUMP_NUM + BUMP_DEN - 1n) / BUMP_DEN
      return bumped > fresh ? bumped : fresh
    }
    const next = {
      nonce: prev.nonce,
      gas: prev.gas,
      maxFeePerGas: up(prev.maxFeePerGas, fees.maxFeePerGas),
      maxPriorityFeePerGas: up(prev.maxPriorityFeePerGas, fees.maxPriorityFeePerGas),
    }
    this.o.log(
      `batch ${batchId}: not mined after ${this.o.bumpAfterMs} ms; re-sending nonce ${prev.nonce} at ${next.maxFeePerGas} wei/gas`,
    )
    return this.signAndSend(batchId, data, next)
  }

  /**
   * Room for a payer whose transfers fail at estimation but succeed when mined (they re-approved in between):
   * the estimate then covers too little, so the limit never goes below a per-leg floor.
   */
  private async estimateGas(data: Hex, legs: number): Promise<bigint> {
    const estimate = await this.o.client.estimateGas({ account: this.operator, to: this.o.settler, data })
    const padded = (estimate * 5n) / 4n + 25_000n
    const floor = 80_000n + BigInt(legs) * 30_000n
    return padded > floor ? padded : floor
  }

  /** Signs, stores the hash and nonce, then broadcasts: a crash after the store write finds the hash on restart. */
  private async signAndSend(batchId: string, data: Hex, t: Omit<Signed, 'hash' | 'accepted'>): Promise<Signed> {
    const raw = await this.o.operator.signTransaction({
      chainId: this.o.chainId,
      type: 'eip1559',
      to: this.o.settler,
      data,
      nonce: t.nonce,
      gas: t.gas,
      maxFeePerGas: t.maxFeePerGas,
      maxPriorityFeePerGas: t.maxPriorityFeePerGas,
    })
    const hash = keccak256(raw)
    await this.o.store.settlement.markSent(batchId, hash, t.nonce, this.o.now())
    // A refused broadcast is not decided here: the wait that follows looks at the chain (mined, nonce taken, or again).
    const accepted = await this.o.client.sendRawTransaction({ serializedTransaction: raw }).then(
      () => true,
      (err: unknown) => {
        this.o.log(`batch ${batchId}: broadcast of ${hash} refused`, err)
        return false
      },
    )
    return { hash, ...t, accepted }
  }

  /** The receipt of whichever of the hashes was mined, or null after bumpAfterMs. */
  private async waitMined(hashes: Hex[]): Promise<TransactionReceipt | null> {
    const deadline = this.o.now() + this.o.bumpAfterMs
    for (;;) {
      for (const hash of hashes) {
        const receipt = await this.o.client.getTransactionReceipt({ hash }).catch(() => null)
        if (receipt) return receipt
      }
      if (this.o.now() >= deadline) return null
      await sleep(this.o.pollMs, undefined, { signal: this.ac.signal })
    }
  }

  private async waitForBlock(block: bigint): Promise<void> {
    while ((await this.o.client.getBlockNumber({ cacheTime: 0 })) < block)
      await sleep(this.o.pollMs, undefined, { signal: this.ac.signal })
  }
}
