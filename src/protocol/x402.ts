/**
 * x402 version 2 on the wire (docs/interface.md §x402): a keyless request is answered 402 with the requirements in the
 * `PAYMENT-REQUIRED` header; the client retries with its signed payment in `PAYMENT-SIGNATURE`; the reply carries the
 * settlement in `PAYMENT-RESPONSE`. Each header is base64 of UTF-8 JSON.
 */

export const X402_VERSION = 2

export const PAYMENT_REQUIRED_HEADER = 'payment-required'
export const PAYMENT_SIGNATURE_HEADER = 'payment-signature'
export const PAYMENT_RESPONSE_HEADER = 'payment-response'

/** One way the gateway accepts to be paid for a request: `exact`, an EIP-3009 transfer of `amount` to `payTo`. */
export interface PaymentRequirements {
  scheme: 'exact'
  /** CAIP-2: `eip155:<chain id>`. */
  network: string
  /** The token (EIP-55). */
  asset: string
  /** Base units, decimal digits. */
  amount: string
  /** The settlement contract (EIP-55). */
  payTo: string
  maxTimeoutSeconds: number
  /** The token's EIP-712 domain, which the payer signs with. */
  extra: { name: string; version: string }
}

export interface ResourceInfo {
  url: string
  description: string
  mimeType: string
}

/** The body of `PAYMENT-REQUIRED`. */
export interface PaymentRequired {
  x402Version: typeof X402_VERSION
  error?: string
  resource: ResourceInfo
  accepts: PaymentRequirements[]
}

/** EIP-3009 `TransferWithAuthorization` as the payer signed it; numbers as decimal strings, nonce 32 bytes hex. */
export interface Authorization {
  from: string
  to: string
  value: string
  validAfter: string
  validBefore: string
  nonce: string
}

/** The body of `PAYMENT-SIGNATURE` for the `exact` scheme on EVM. */
export interface PaymentPayload {
  x402Version: number
  resource?: ResourceInfo
  /** The requirements the client chose, as it sent them back: any scheme may arrive. */
  accepted: Omit<PaymentRequirements, 'scheme'> & { scheme: string }
  payload: { signature: string; authorization: Authorization }
}

/** The body of `PAYMENT-RESPONSE`. */
export interface SettleResponse {
  success: boolean
  transaction: string
  network: string
  payer: string
  errorReason?: string
}

export function encodeHeader(value: PaymentRequired | SettleResponse): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64')
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/
const HEX32 = /^0x[0-9a-fA-F]{64}$/
const ADDRESS = /^0x[0-9a-fA-F]{40}$/
const DIGITS = /^\d{1,78}$/

/** A `PAYMENT-SIGNATURE` header read as an `exact` EVM payment; a string saying what is wrong with it otherwise. */
export function decodePaymentSignature(header: string): PaymentPayload | string {
  if (header.length > 16_384 || !BASE64.test(header)) return 'the PAYMENT-SIGNATURE header is not base64'
  let v: unknown
  try {
    v = JSON.parse(Buffer.from(header, 'base64').toString('utf8'))
  } catch {
    return 'the PAYMENT-SIGNATURE header is not base64 of JSON'
  }
  const p = v as Partial<PaymentPayload> | null
  if (!p || typeof p !== 'object') return 'the payment is not a JSON object'
  if (p.x402Version !== X402_VERSION) return `x402Version must be ${X402_VERSION}`
  const a = p.accepted as Partial<PaymentRequirements> | undefined
  if (!a || typeof a !== 'object' || typeof a.scheme !== 'string' || typeof a.network !== 'string')
    return 'the payment names no accepted requirements (accepted.scheme, accepted.network)'
  const body = p.payload as Partial<PaymentPayload['payload']> | undefined
  const auth = body?.authorization as Partial<Authorization> | undefined
  if (typeof body?.signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(body.signature))
    return 'payload.signature must be a 65-byte hex signature'
  if (!auth || typeof auth !== 'object') return 'payload.authorization is missing'
  if (typeof auth.from !== 'string' || !ADDRESS.test(auth.from)) return 'authorization.from must be an address'
  if (typeof auth.to !== 'string' || !ADDRESS.test(auth.to)) return 'authorization.to must be an address'
  for (const f of ['value', 'validAfter', 'validBefore'] as const)
    if (typeof auth[f] !== 'string' || !DIGITS.test(auth[f])) return `authorization.${f} must be a decimal integer`
  if (typeof auth.nonce !== 'string' || !HEX32.test(auth.nonce)) return 'authorization.nonce must be 32 bytes of hex'
  return p as PaymentPayload
}
