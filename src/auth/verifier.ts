import { apiError, type ApiError } from '../protocol/errors.js'
import type { Store } from '../store/store.js'
import type { KeyOwner } from '../store/keys.js'
import type { Caller } from './caller.js'
import { KEY_PREFIX, hashKey, isKeyShaped } from './keys.js'

interface Cached {
  owner: KeyOwner | null
  until: number
}

const MAX_CACHED = 10_000
const UNKNOWN = apiError('invalid_api_key', 'Unknown or revoked API key.')

/**
 * Checks Bearer keys against the store, caching the answer for `ttlMs` so the hot path rarely reads.
 * Revocation and suspension in this process invalidate at once; other processes see them within the TTL.
 */
export class KeyVerifier {
  private readonly cache = new Map<string, Cached>()
  private readonly touched = new Set<string>()

  constructor(
    private readonly store: Store,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The caller behind an Authorization header, or why it is refused. Answered at once (no promise) when the store need
   * not be read: no key, a key of another network, or a cached answer — every request of a key in use.
   */
  verify(authorization: string | undefined): Caller | ApiError | Promise<Caller | ApiError> {
    const key = bearer(authorization)
    if (!key) {
      const sent = authorization !== undefined && authorization.trim() !== ''
      return apiError(
        'invalid_api_key',
        `${sent ? 'The Authorization header holds no Bearer key' : 'Missing API key'}. Send it as "Authorization: Bearer svc_test_…"; keys are created in the account portal.`,
      )
    }
    // Keyed by the presented key itself, so a cached answer costs no hashing (nor any check below).
    const entry = this.cache.get(key)
    const now = this.now()
    if (entry && entry.until > now) return this.answer(entry.owner)
    if (!key.startsWith(KEY_PREFIX))
      return apiError('invalid_api_key', `Unknown API key: keys of this network start with ${KEY_PREFIX}.`)
    // No key of ours has another shape: refused without reading the store or filling the cache (a client could
    // otherwise make it hold 10 000 keys as long as its headers allow).
    if (!isKeyShaped(key)) return UNKNOWN
    return this.lookUp(key, now)
  }

  private async lookUp(key: string, now: number): Promise<Caller | ApiError> {
    const entry = { owner: (await this.store.keys.ownerOf(hashKey(key))) ?? null, until: now + this.ttlMs }
    if (this.cache.size >= MAX_CACHED) this.cache.clear()
    if (this.ttlMs > 0) this.cache.set(key, entry)
    return this.answer(entry.owner)
  }

  private answer(owner: KeyOwner | null): Caller | ApiError {
    if (!owner || owner.revoked) return UNKNOWN
    if (owner.accountStatus !== 'active')
      return apiError('account_suspended', 'This account is suspended; its keys cannot make requests.')
    this.touched.add(owner.keyId)
    const { rpm, tpm, spend } = owner.limits
    const limited = rpm !== null || tpm !== null
    return {
      keyId: owner.keyId,
      accountId: owner.accountId,
      address: owner.address,
      ...(limited ? { limits: owner.limits } : {}),
      ...(spend ? { spend } : {}),
    }
  }

  /** Forgets cached answers, after a revocation or a change of account status. */
  invalidate(): void {
    this.cache.clear()
  }

  /** Writes last-used times of keys used since the previous flush (one statement, off the request path). */
  async flushLastUsed(): Promise<void> {
    if (this.touched.size === 0) return
    const ids = [...this.touched]
    this.touched.clear()
    await this.store.keys.touch(ids, this.now())
  }
}

function bearer(header: string | undefined): string | null {
  if (!header) return null
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return m ? m[1]! : null
}
