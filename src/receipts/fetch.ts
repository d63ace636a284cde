import type { ReceiptProof, SignedReceipt } from './book.js'
import type { PublishedSigner } from './key.js'

/** What a receipt file holds: a signed receipt (or the usage record carrying one), with its proof when saved beside. */
export interface ReceiptFile {
  signed: SignedReceipt
  proof?: ReceiptProof
}

/**
 * Reads a receipt file: the `receipt` object of GET /v1/usage/{id} (or that whole answer), optionally with the answer
 * of GET /v1/usage/{id}/proof as its `proof`, as the portal's download saves it. Null when it holds no signed receipt.
 */
export function parseReceiptFile(json: unknown): ReceiptFile | null {
  const o = json as { receipt?: unknown; signature?: unknown; proof?: unknown } | null
  if (typeof o !== 'object' || o === null) return null
  const signed = (typeof o.signature === 'string' ? o : o.receipt) as SignedReceipt | undefined
  if (!signed || typeof signed.signature !== 'string' || typeof signed.receipt !== 'object') return null
  const proof = (o.proof ?? (signed as { proof?: unknown }).proof) as ReceiptProof | undefined
  return { signed, ...(proof ? { proof } : {}) }
}

/** The published receipt signers of a gateway (GET /v1/receipts/signer, no key needed). */
export async function fetchSigners(baseUrl: string): Promise<PublishedSigner[]> {
  const res = await fetch(new URL('/v1/receipts/signer', baseUrl))
  if (!res.ok) throw new Error(`GET /v1/receipts/signer answered ${res.status}`)
  return ((await res.json()) as { signers: PublishedSigner[] }).signers
}

/** A receipt's proof from its gateway (GET /v1/usage/{id}/proof, with the owner's key); the error's message if none. */
export async function fetchProof(
  baseUrl: string,
  apiKey: string,
  requestId: string,
): Promise<ReceiptProof | { error: string }> {
  const res = await fetch(new URL(`/v1/usage/${encodeURIComponent(requestId)}/proof`, baseUrl), {
    headers: { authorization: `Bearer ${apiKey}` },
  })
  const body = (await res.json()) as ReceiptProof & { error?: { message: string } }
  return res.ok ? body : { error: body.error?.message ?? `GET proof answered ${res.status}` }
}
