import { getAddress, hashTypedData, type Address, type Hex, type TypedDataDomain } from 'viem'

/** The EIP-712 domain's name and version of every receipt. */
export const RECEIPT_DOMAIN_NAME = 'svc receipts'
export const RECEIPT_DOMAIN_VERSION = '1'

/**
 * The domain receipts are signed in: on a chain, its id and the BatchSettler contract that pays them; on the local
 * rail, the name and version alone (no chain vouches for those receipts).
 */
export function receiptDomain(chain?: { chainId: number; settler: Address }): TypedDataDomain {
  const base = { name: RECEIPT_DOMAIN_NAME, version: RECEIPT_DOMAIN_VERSION }
  return chain ? { ...base, chainId: chain.chainId, verifyingContract: getAddress(chain.settler) } : base
}

/** The EIP-712 type of a receipt. Token counts the upstream did not report are -1. */
export const RECEIPT_TYPES = {
  Receipt: [
    { name: 'requestId', type: 'string' },
    { name: 'keyId', type: 'string' },
    { name: 'payer', type: 'address' },
    { name: 'model', type: 'string' },
    { name: 'servedModel', type: 'string' },
    { name: 'provider', type: 'string' },
    { name: 'bodySha256', type: 'bytes32' },
    { name: 'promptTokens', type: 'uint256' },
    { name: 'completionTokens', type: 'uint256' },
    { name: 'upstreamPromptTokens', type: 'int256' },
    { name: 'upstreamCompletionTokens', type: 'int256' },
    { name: 'inputPricePerMtok', type: 'uint256' },
    { name: 'outputPricePerMtok', type: 'uint256' },
    { name: 'cost', type: 'uint256' },
    { name: 'fee', type: 'uint256' },
    { name: 'outcome', type: 'string' },
    { name: 'createdAt', type: 'uint256' },
  ],
} as const

/**
 * A receipt as the API serves it and a client keeps it: amounts and prices are base-unit strings, times epoch ms.
 * Every field is signed; `receipt_id` names it (the request's ULID).
 */
export interface WireReceipt {
  object: 'usage.receipt'
  receipt_id: string
  request_id: string
  key_id: string
  payer: string
  model: string
  served_model: string | null
  provider: string | null
  body_sha256: string | null
  prompt_tokens: number
  completion_tokens: number
  upstream_prompt_tokens: number | null
  upstream_completion_tokens: number | null
  input_price_per_mtok: string
  output_price_per_mtok: string
  cost: string
  fee: string
  outcome: string
  created_at: number
}

const NO_BODY = `0x${'0'.repeat(64)}` as Hex

/** The signed message of a receipt; absent values are empty strings, a zero hash and -1 counts. */
export function receiptMessage(r: WireReceipt) {
  return {
    requestId: r.request_id,
    keyId: r.key_id,
    payer: getAddress(r.payer),
    model: r.model,
    servedModel: r.served_model ?? '',
    provider: r.provider ?? '',
    bodySha256: r.body_sha256 ? (`0x${r.body_sha256}` as Hex) : NO_BODY,
    promptTokens: BigInt(r.prompt_tokens),
    completionTokens: BigInt(r.completion_tokens),
    upstreamPromptTokens: BigInt(r.upstream_prompt_tokens ?? -1),
    upstreamCompletionTokens: BigInt(r.upstream_completion_tokens ?? -1),
    inputPricePerMtok: BigInt(r.input_price_per_mtok),
    outputPricePerMtok: BigInt(r.output_price_per_mtok),
    cost: BigInt(r.cost),
    fee: BigInt(r.fee),
    outcome: r.outcome,
    createdAt: BigInt(r.created_at),
  }
}

/** The receipt's EIP-712 digest: what its signature signs, and its leaf in a batch's receipts root. */
export function receiptDigest(domain: TypedDataDomain, r: WireReceipt): Hex {
  return hashTypedData({ domain, types: RECEIPT_TYPES, primaryType: 'Receipt', message: receiptMessage(r) })
}

/** `rct_<ulid>`: a receipt shares its request's ULID, as the completion id does. */
export function receiptId(requestId: string): string {
  return `rct_${requestId.replace(/^req_/, '')}`
}

/** The request id a receipt id or a request id names. */
export function requestIdOf(id: string): string {
  return id.startsWith('rct_') ? `req_${id.slice(4)}` : id
}
