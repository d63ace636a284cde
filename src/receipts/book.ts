import type { Hex, TypedDataDomain } from 'viem'
import type { ReceiptsRepo } from '../store/receipts.js'
import { batchKey } from '../chain/contracts.js'
import type { ReceiptKey, PublishedSigner } from './key.js'
import { merkleProof } from './merkle.js'
import { RECEIPT_TYPES, receiptDigest, receiptMessage, type WireReceipt } from './typed-data.js'
import { wireReceipt } from './wire.js'
import { AUDIT_RECORD_TYPES, auditRecordMessage, type WireAudit } from './audit-record.js'

/** A receipt with its EIP-712 signature: what `GET /v1/usage/{id}` serves and `svc receipt verify` checks. */
export interface SignedReceipt {
  receipt: WireReceipt
  domain: TypedDataDomain
  signer: string
  signature: Hex
}

/** Where a receipt's charge was settled, and the path from its leaf to the root the batch committed to. */
export interface ReceiptProof {
  object: 'usage.receipt_proof'
  receipt_id: string
  request_id: string
  rail: 'local' | 'evm'
  batch_id: string
  /** The contract's id of the batch (keccak256 of `batch_id`), as its ReceiptsCommitted event names it. */
  batch_key: Hex
  leaf: Hex
  index: number
  proof: Hex[]
  root: Hex
  chain_id: number | null
  settler: string | null
  /** The transaction that paid the batch and recorded its root; null on the local rail. */
  tx_hash: string | null
  block: string | null
}

/** Why there is no proof yet: nothing charged, or its batch not settled yet. */
export type NoProof = { kind: 'unknown' } | { kind: 'uncharged'; outcome: string } | { kind: 'unsettled'; why: string }

/** Signs receipts on read (EIP-712 signatures are deterministic: the same record signs the same) and proves them. */
export class ReceiptBook {
  constructor(
    private readonly repo: ReceiptsRepo,
    private readonly key: ReceiptKey,
    readonly domain: TypedDataDomain,
    readonly rail: 'local' | 'evm',
  ) {}

  get signers(): PublishedSigner[] {
    return this.key.signers
  }

  /** The signed receipt of one of the account's requests. */
  async signed(accountId: number, requestId: string): Promise<SignedReceipt | undefined> {
    const record = await this.repo.record(accountId, requestId)
    return record && this.sign(wireReceipt(record))
  }

  async sign(receipt: WireReceipt): Promise<SignedReceipt> {
    const signature = await this.key.account.signTypedData({
      domain: this.domain,
      types: RECEIPT_TYPES,
      primaryType: 'Receipt',
      message: receiptMessage(receipt),
    })
    return { receipt, domain: this.domain, signer: this.key.account.address, signature }
  }

  /** An audit's record, signed as a receipt is (`AUDIT_RECORD_TYPES`). */
  async signAudit(
    record: WireAudit,
  ): Promise<{ record: WireAudit; domain: TypedDataDomain; signer: string; signature: Hex }> {
    const signature = await this.key.account.signTypedData({
      domain: this.domain,
      types: AUDIT_RECORD_TYPES,
      primaryType: 'AuditRecord',
      message: auditRecordMessage(record),
    })
    return { record, domain: this.domain, signer: this.key.account.address, signature }
  }

  /** The proof of one of the account's charges once its batch is settled, or why there is none. */
  async proof(accountId: number, requestId: string): Promise<ReceiptProof | NoProof> {
    const record = await this.repo.record(accountId, requestId)
    if (!record) return { kind: 'unknown' }
    const receipt = wireReceipt(record)
    if (record.cost === 0n) return { kind: 'uncharged', outcome: record.outcome }
    const batch = await this.repo.settledIn(accountId, requestId)
    if (!batch) return { kind: 'unsettled', why: 'it is in no settlement batch yet' }
    if (batch.status !== 'settled' || !batch.root)
      return { kind: 'unsettled', why: `its batch ${batch.batchId} is ${batch.status}` }
    const leaves = batch.leaves.map((l) => l.leaf as Hex)
    const index = batch.leaves.findIndex((l) => l.requestId === requestId)
    const leaf = receiptDigest(this.domain, receipt)
    if (index < 0 || leaves[index] !== leaf)
      throw new Error(`the receipt of ${requestId} is not the leaf its batch ${batch.batchId} committed to`)
    const chain = this.domain.chainId === undefined ? null : Number(this.domain.chainId)
    return {
      object: 'usage.receipt_proof',
      receipt_id: receipt.receipt_id,
      request_id: requestId,
      rail: this.rail,
      batch_id: batch.batchId,
      batch_key: batchKey(batch.batchId),
      leaf,
      index,
      proof: merkleProof(leaves, index),
      root: batch.root as Hex,
      chain_id: chain,
      settler: this.domain.verifyingContract ?? null,
      tx_hash: this.rail === 'evm' ? batch.txHash : null,
      block: this.rail === 'evm' && batch.block !== null ? batch.block.toString() : null,
    }
  }
}
