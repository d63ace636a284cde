import { randomBytes } from 'node:crypto'
import { apiError, type ApiError } from '../protocol/errors.js'
import { checksumAddress, isEvmAddress } from '../protocol/address.js'
import type { Store } from '../store/store.js'

/**
 * Sign-In with Ethereum (EIP-4361): the server issues a nonce, the wallet signs a message naming it, the server checks
 * both.
 */

export const NONCE_TTL_MS = 5 * 60_000
/** How far a wallet's clock may run ahead of ours in `Issued At`. */
const CLOCK_SKEW_MS = 60_000
const MAX_MESSAGE_CHARS = 4096

/** What a valid message must name: this portal's host and origin, and its chain. */
export interface Expected {
  domain: string
  origin: string
  chainId: number
  now: number
}

export interface SignInRequest {
  message: string
  signature: string
}

export async function issueNonce(store: Store, now: number): Promise<{ nonce: string; expiresAt: number }> {
  // EIP-4361 nonces are alphanumeric, at least 8 characters.
  const nonce = randomBytes(16).toString('hex')
  const expiresAt = now + NONCE_TTL_MS
  await store.portal.issueNonce(nonce, now, expiresAt)
  return { nonce, expiresAt }
}

const refused = (why: string) => apiError('sign_in_failed', `Sign-in refused: ${why}`)

/**
 * Checks a signed sign-in message; the nonce is used up by any attempt, so nothing can be replayed. Returns the EIP-55
 * address.
 */
export async function verifySignIn(
  store: Store,
  body: unknown,
  want: Expected,
): Promise<{ address: string } | ApiError> {
  const req = body as Partial<SignInRequest> | undefined
  if (typeof req?.message !== 'string' || req.message.length > MAX_MESSAGE_CHARS) {
    return apiError('feature_not_supported', 'message must be the signed EIP-4361 text.', { param: 'message' })
  }
  if (typeof req.signature !== 'string' || !/^0x[0-9a-fA-F]{2,2048}$/.test(req.signature)) {
    return apiError('feature_not_supported', 'signature must be a 0x-prefixed hex string.', { param: 'signature' })
  }
  // viem loads on first sign-in, not at start: it is large and the request path never needs it.
  const { parseSiweMessage } = await import('viem/siwe')
  const m = parseSiweMessage(req.message)
  if (!m.nonce || !m.address || !m.domain || !m.uri || m.chainId === undefined || m.version !== '1' || !m.issuedAt) {
    return refused(
      'the message is not an EIP-4361 message with domain, address, URI, version 1, chain id, nonce and issued-at.',
    )
  }
  // An unreadable date parses to an invalid Date, which every comparison below would let through.
  for (const [field, date] of [
    ['Issued At', m.issuedAt],
    ['Expiration Time', m.expirationTime],
    ['Not Before', m.notBefore],
  ] as const) {
    if (date !== undefined && Number.isNaN(date.getTime()))
      return refused(`the message's ${field} is not an RFC 3339 date-time.`)
  }
  const nonce = await store.portal.consumeNonce(m.nonce, want.now)
  if (nonce === 'unknown') return refused('the nonce is unknown, expired or already used; request a new one.')
  if (nonce === 'expired') return refused('the nonce expired; request a new one.')
  if (m.domain !== want.domain) return refused(`the message is for ${m.domain}, this portal is ${want.domain}.`)
  if (originOf(m.uri) !== want.origin) return refused(`the message's URI ${m.uri} is not on ${want.origin}.`)
  if (m.chainId !== want.chainId)
    return refused(`the message names chain ${m.chainId}; this portal signs in on chain ${want.chainId}.`)
  if (m.issuedAt.getTime() > want.now + CLOCK_SKEW_MS) return refused('the message was issued in the future.')
  if (m.expirationTime && m.expirationTime.getTime() <= want.now) return refused('the message has expired.')
  if (m.notBefore && m.notBefore.getTime() > want.now) return refused('the message is not valid yet.')
  if (!isEvmAddress(m.address)) return refused('the message does not name a wallet address.')
  const { verifyMessage } = await import('viem')
  const valid = await verifyMessage({
    address: m.address,
    message: req.message,
    signature: req.signature as `0x${string}`,
  }).catch(() => false)
  if (!valid) return refused(`the signature is not from ${m.address}.`)
  return { address: checksumAddress(m.address) }
}

function originOf(uri: string): string | null {
  try {
    return new URL(uri).origin
  } catch {
    return null
  }
}
