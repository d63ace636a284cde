import { getAddress, isAddressEqual, parseEventLogs, recoverTypedDataAddress, type Hex, type PublicClient } from 'viem'
import { batchKey, settlerAbi } from '../chain/contracts.js'
import type { ReceiptProof, SignedReceipt } from './book.js'
import type { PublishedSigner } from './key.js'
import { rootFromProof } from './merkle.js'
import { RECEIPT_TYPES, receiptDigest, receiptMessage } from './typed-data.js'

/** One thing verification checks: `ok` null when it could not be checked (and `detail` says why). */
export interface Check {
  name: 'signature' | 'leaf' | 'proof' | 'chain'
  ok: boolean | null
  detail: string
}

/** What holds of a receipt: `ok` when no check failed, `complete` when every check could run. */
export interface Verdict {
  ok: boolean
  complete: boolean
  checks: Check[]
}

export interface VerifyInput {
  signed: SignedReceipt
  /** The published receipt signers (GET /v1/receipts/signer). */
  signers: PublishedSigner[]
  /** The receipt's proof (GET /v1/usage/{id}/proof); without it only the signature is checked. */
  proof?: ReceiptProof
  /** A client of the chain the domain names, to read the batch's transaction; without it the chain is not checked. */
  chain?: PublicClient
}

/**
 * Verifies a receipt: its signature against the published signers, its leaf recomputed from its fields, its Merkle
 * proof up to the root, and that root in the batch's transaction on chain (ReceiptsCommitted of the settler the
 * receipt's domain names). Each check says plainly what holds or what does not.
 */
export async function verifyReceipt(input: VerifyInput): Promise<Verdict> {
  const checks: Check[] = [await signatureCheck(input)]
  const leaf = receiptDigest(input.signed.domain, input.signed.receipt)
  const p = input.proof
  if (!p) {
    const none = 'no proof given: its charge is not shown to be settled'
    checks.push({ name: 'leaf', ok: null, detail: none }, { name: 'proof', ok: null, detail: none })
    checks.push({ name: 'chain', ok: null, detail: none })
  } else {
    checks.push(
      p.leaf === leaf
        ? { name: 'leaf', ok: true, detail: `the receipt's EIP-712 digest ${leaf} is the proof's leaf` }
        : {
            name: 'leaf',
            ok: false,
            detail: `the receipt's digest ${leaf} is not the proof's leaf ${p.leaf}: the receipt is not the one its batch committed to`,
          },
    )
    const root = rootFromProof(leaf, p.proof)
    checks.push(
      root === p.root
        ? { name: 'proof', ok: true, detail: `the Merkle proof leads from the receipt to root ${p.root}` }
        : {
            name: 'proof',
            ok: false,
            detail: `the Merkle proof leads from the receipt to ${root}, not to the batch's root ${p.root}`,
          },
    )
    checks.push(await chainCheck(input, p))
  }
  return { ok: checks.every((c) => c.ok !== false), complete: checks.every((c) => c.ok !== null), checks }
}

async function signatureCheck({ signed, signers }: VerifyInput): Promise<Check> {
  let recovered: string
  try {
    recovered = await recoverTypedDataAddress({
      domain: signed.domain,
      types: RECEIPT_TYPES,
      primaryType: 'Receipt',
      message: receiptMessage(signed.receipt),
      signature: signed.signature,
    })
  } catch (err) {
    return { name: 'signature', ok: false, detail: `the signature cannot be read (${(err as Error).message})` }
  }
  const signer = signers.find((s) => isAddressEqual(getAddress(s.address), getAddress(recovered)))
  if (!signer)
    return {
      name: 'signature',
      ok: false,
      detail: `the signature recovers ${recovered}, which is not a published receipt signer: the receipt was changed after it was signed, or another key signed it`,
    }
  if (signer.valid_until !== null && signed.receipt.created_at >= Date.parse(signer.valid_until))
    return {
      name: 'signature',
      ok: false,
      detail: `signed by ${recovered}, retired at ${signer.valid_until}, before the receipt's time ${new Date(signed.receipt.created_at).toISOString()}`,
    }
  return { name: 'signature', ok: true, detail: `signed by ${recovered}, a published receipt signer` }
}

async function chainCheck({ signed, chain }: VerifyInput, p: ReceiptProof): Promise<Check> {
  if (p.rail === 'local' || p.tx_hash === null)
    return {
      name: 'chain',
      ok: null,
      detail: `not on a chain: the root of batch ${p.batch_id} is recorded in the gateway's store (local rail), so it rests on the gateway's word`,
    }
  if (batchKey(p.batch_id) !== p.batch_key)
    return { name: 'chain', ok: false, detail: `the proof's batch key is not the key of batch ${p.batch_id}` }
  const settler = signed.domain.verifyingContract
  if (!settler || signed.domain.chainId === undefined)
    return {
      name: 'chain',
      ok: false,
      detail: "the receipt's domain names no chain and settler to look the root up on",
    }
  if (!chain) return { name: 'chain', ok: null, detail: `not checked: no node of chain ${signed.domain.chainId} given` }
  const chainId = await chain.getChainId()
  if (chainId !== Number(signed.domain.chainId))
    return {
      name: 'chain',
      ok: false,
      detail: `the node serves chain ${chainId}, the receipt names ${signed.domain.chainId}`,
    }
  const tx = await chain.getTransactionReceipt({ hash: p.tx_hash as Hex }).catch(() => null)
  if (!tx) return { name: 'chain', ok: false, detail: `the chain has no transaction ${p.tx_hash}` }
  if (tx.status !== 'success') return { name: 'chain', ok: false, detail: `transaction ${p.tx_hash} reverted` }
  const logs = parseEventLogs({ abi: settlerAbi, logs: tx.logs }).filter((l) => isAddressEqual(l.address, settler))
  const committed = logs.find((l) => l.eventName === 'ReceiptsCommitted' && l.args.batchId === p.batch_key)
  if (!committed || committed.eventName !== 'ReceiptsCommitted')
    return {
      name: 'chain',
      ok: false,
      detail: `transaction ${p.tx_hash} records no receipts root of batch ${p.batch_id} from settler ${settler}`,
    }
  if (committed.args.receiptsRoot !== p.root)
    return {
      name: 'chain',
      ok: false,
      detail: `transaction ${p.tx_hash} records root ${committed.args.receiptsRoot} for batch ${p.batch_id}, not the proof's ${p.root}`,
    }
  // A request paid with x402 (key `x402`) was paid by the settlement contract from what its wallet paid it in advance.
  const payer = signed.receipt.key_id === 'x402' ? settler : getAddress(signed.receipt.payer)
  const failed = logs.some((l) => l.eventName === 'PayerFailed' && isAddressEqual(l.args.payer, payer))
  if (failed)
    return { name: 'chain', ok: false, detail: `transaction ${p.tx_hash} failed to collect from payer ${payer}` }
  return {
    name: 'chain',
    ok: true,
    detail: `transaction ${p.tx_hash} (block ${tx.blockNumber}) on chain ${chainId} records root ${p.root} for batch ${p.batch_id} and paid it`,
  }
}
