import { randomBytes } from 'node:crypto'
import { checksumAddress, hasValidChecksum, isEvmAddress } from '../protocol/address.js'
import { generateKey } from '../auth/keys.js'
import type { Store } from '../store/store.js'
import type { Account } from '../store/accounts.js'
import { NO_LIMITS, type KeyLimits } from '../limits/limits.js'
import { LIMIT_RESETS } from '../limits/period.js'
import { formatUsdc } from '../money/usdc.js'

/** Account operations shared by the CLI, the portal and the demo. Wallets are stored EIP-55 checksummed. */

export class OperationError extends Error {}

export function normalizeWallet(text: string): string {
  if (!isEvmAddress(text)) throw new OperationError(`not a wallet address: ${text}`)
  if (!hasValidChecksum(text))
    throw new OperationError(`bad EIP-55 checksum in ${text}; check the address or write it in lower case`)
  return checksumAddress(text)
}

export async function openAccount(
  store: Store,
  wallet: string,
  now: number,
): Promise<{ account: Account; created: boolean }> {
  return store.accounts.ensure(normalizeWallet(wallet), 'user', now)
}

export async function requireAccount(store: Store, wallet: string): Promise<Account> {
  const account = await store.accounts.byAddress(normalizeWallet(wallet))
  if (!account)
    throw new OperationError(`no account for ${wallet}; create it with: svc account create --wallet ${wallet}`)
  return account
}

export const MAX_KEY_NAME = 64

/**
 * Why a key name cannot be stored as given, or null. A name is 1 to 64 characters (code points, once trimmed), none of
 * them a control character, a lone surrogate or a bidirectional control that could make one name pose as another.
 */
export function keyNameProblem(name: string): string | null {
  const length = [...name.trim()].length
  if (length === 0 || length > MAX_KEY_NAME || /[\p{Cc}\p{Cs}\u200E\u200F\u202A-\u202E\u2066-\u2069]/u.test(name)) {
    return `name must be 1 to ${MAX_KEY_NAME} printable characters`
  }
  return null
}

/**
 * Creates an API key named `name` (trimmed; refused with OperationError when `keyNameProblem` says why). With
 * `maxLive`, refused (OperationError) while the account has that many live keys.
 */
export async function issueKey({
  store,
  accountId,
  name: raw,
  now,
  maxLive = Infinity,
  limits = NO_LIMITS,
}: {
  store: Store
  accountId: number
  name: string
  now: number
  maxLive?: number
  limits?: KeyLimits
}): Promise<{ id: string; key: string; prefix: string; name: string; createdAt: number }> {
  const problem = keyNameProblem(raw) ?? keyLimitsProblem(limits)
  if (problem) throw new OperationError(problem)
  const name = raw.trim()
  const k = generateKey()
  const row = { id: k.id, accountId, hash: k.hash, prefix: k.prefix, name, now, limits }
  const live = await store.keys.insert(row, maxLive)
  if (live >= maxLive)
    throw new OperationError(`This account has ${live} live keys, the most allowed; revoke one first.`)
  return { id: k.id, key: k.key, prefix: k.prefix, name, createdAt: now }
}

/** The most requests or tokens a minute a key's limit may name. */
export const MAX_RATE = 1_000_000_000

/**
 * Why limits cannot be set, or null: each rate is none or a whole number from 1 to MAX_RATE; a spend limit is more
 * than 0 and at most MAX_AMOUNT, with a reset of LIMIT_RESETS.
 */
export function keyLimitsProblem(limits: KeyLimits): string | null {
  for (const [name, v] of [['rpm', limits.rpm] as const, ['tpm', limits.tpm] as const])
    if (v !== null && (!Number.isInteger(v) || v < 1 || v > MAX_RATE))
      return `${name} must be a whole number from 1 to ${MAX_RATE}, or none`
  const { spend } = limits
  if (spend && (spend.limit <= 0n || spend.limit > MAX_AMOUNT))
    return `a spend limit must be more than 0 and at most ${formatUsdc(MAX_AMOUNT)} USDC, or none`
  if (spend && !LIMIT_RESETS.includes(spend.reset))
    return `a spend limit resets ${LIMIT_RESETS.join(', ')}; not ${String(spend.reset)}`
  return null
}

/** Sets the limits of one of the account's live keys; a spend limit's period is the one that holds `now`. */
export async function setKeyLimits(
  store: Store,
  key: { accountId: number; keyId: string },
  limits: KeyLimits,
  now: number,
): Promise<void> {
  const problem = keyLimitsProblem(limits)
  if (problem) throw new OperationError(problem)
  if (!(await store.keys.setLimits(key.accountId, key.keyId, limits, now)))
    throw new OperationError(`no live key ${key.keyId}`)
}

/** Largest balance or cap an account may hold: 10^9 USDC (10^15 base units), so that sums over thousands of
 * accounts (the world account's postings, audits) stay inside the store's 64-bit integers. */
export const MAX_AMOUNT = 10n ** 15n

export async function depositTo(store: Store, accountId: number, amount: bigint, now: number): Promise<Account> {
  if (amount <= 0n) throw new OperationError('a deposit must be positive')
  if (amount > MAX_AMOUNT) throw new OperationError(`a deposit may be at most ${formatUsdc(MAX_AMOUNT)} USDC`)
  const after = await store.accounts.deposit({
    id: accountId,
    amount,
    ref: `dep_${randomBytes(8).toString('hex')}`,
    now,
    max: MAX_AMOUNT,
  })
  if (!after) throw new OperationError(`the balance would exceed ${formatUsdc(MAX_AMOUNT)} USDC; nothing was deposited`)
  return after
}

/** Sets the approved spending cap (as an ERC-20 `approve` sets an allowance). */
export async function approveCap(store: Store, accountId: number, cap: bigint): Promise<void> {
  if (cap < 0n || cap > MAX_AMOUNT)
    throw new OperationError(`a cap must be between 0 and ${formatUsdc(MAX_AMOUNT)} USDC`)
  await store.accounts.approve(accountId, cap)
}
