import type { ReceiptProof, SignedReceipt } from '../../src/receipts/book.js'
import type { PublishedSigner } from '../../src/receipts/key.js'

/** GET a /v1 path with the key; the answer's status, body and request id. */
export async function getWithKey(url: string, key: string | undefined, path: string) {
  const res = await fetch(`${url}${path}`, key ? { headers: { authorization: `Bearer ${key}` } } : {})
  return {
    status: res.status,
    body: (await res.json()) as Record<string, unknown>,
    requestId: res.headers.get('x-request-id'),
  }
}

/** The signed receipt of a request, as GET /v1/usage/{id} serves it. */
export async function receiptOf(url: string, key: string, id: string): Promise<SignedReceipt> {
  const r = await getWithKey(url, key, `/v1/usage/${id}`)
  if (r.status !== 200) throw new Error(`GET /v1/usage/${id}: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body.receipt as SignedReceipt
}

export async function proofOf(url: string, key: string, id: string): Promise<ReceiptProof> {
  const r = await getWithKey(url, key, `/v1/usage/${id}/proof`)
  if (r.status !== 200) throw new Error(`GET /v1/usage/${id}/proof: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body as unknown as ReceiptProof
}

export async function signersOf(url: string): Promise<PublishedSigner[]> {
  return (await getWithKey(url, undefined, '/v1/receipts/signer')).body.signers as PublishedSigner[]
}

/** The receipt with one field changed, its signature kept. */
export function altered(s: SignedReceipt, change: Partial<SignedReceipt['receipt']>): SignedReceipt {
  return { ...s, receipt: { ...s.receipt, ...change } }
}
