import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import type { StoreDialect } from './dialect.js'
import { num, numOrNull } from './ints.js'

/** A key's rate limits: requests and tokens a minute; null where it has none. */
export interface RateLimits {
  rpm: number | null
  tpm: number | null
}

export const NO_LIMITS: RateLimits = { rpm: null, tpm: null }

export interface ApiKey {
  id: string
  accountId: number
  prefix: string
  name: string
  createdAt: number
  lastUsedAt: number | null
  revokedAt: number | null
  limits: RateLimits
}

export interface KeyOwner {
  keyId: string
  accountId: number
  address: string
  accountStatus: 'active' | 'suspended'
  revoked: boolean
  limits: RateLimits
}

export class KeyRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {}

  /**
   * Inserts a key while its account has fewer than `maxLive` live keys, and returns how many it had; a key is not
   * inserted when that is `maxLive` or more. They are counted with the account's row locked (on SQLite every
   * transaction holds the write lock), so creations at the same time cannot pass the bound together.
   */
  async insert(
    k: { id: string; accountId: number; hash: string; prefix: string; name: string; now: number; limits?: RateLimits },
    maxLive = Infinity,
  ): Promise<number> {
    return this.db.transaction().execute(async (trx) => {
      await this.dialect.lockAccount(trx, k.accountId)
      const live = num(
        (
          await trx
            .selectFrom('api_keys')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('account_id', '=', k.accountId)
            .where('revoked_at', 'is', null)
            .executeTakeFirstOrThrow()
        ).n,
      )
      if (live >= maxLive) return live
      await trx
        .insertInto('api_keys')
        .values({
          id: k.id,
          account_id: k.accountId,
          hash: k.hash,
          prefix: k.prefix,
          name: k.name,
          created_at: BigInt(k.now),
          last_used_at: null,
          revoked_at: null,
          rpm: k.limits?.rpm ?? null,
          tpm: k.limits?.tpm ?? null,
        })
        .execute()
      return live
    })
  }

  /** The key with this hash and its account, or undefined. */
  async ownerOf(hash: string): Promise<KeyOwner | undefined> {
    const r = await this.db
      .selectFrom('api_keys')
      .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
      .select([
        'api_keys.id as keyId',
        'api_keys.account_id as accountId',
        'api_keys.revoked_at as revokedAt',
        'accounts.status as status',
        'accounts.address as address',
        'api_keys.rpm as rpm',
        'api_keys.tpm as tpm',
      ])
      .where('api_keys.hash', '=', hash)
      .executeTakeFirst()
    if (!r) return undefined
    return {
      keyId: r.keyId,
      accountId: num(r.accountId),
      address: r.address,
      accountStatus: r.status,
      revoked: r.revokedAt !== null,
      limits: { rpm: numOrNull(r.rpm), tpm: numOrNull(r.tpm) },
    }
  }

  async list(accountId: number): Promise<ApiKey[]> {
    const rows = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .execute()
    return rows.map((r) => ({
      id: r.id,
      accountId: num(r.account_id),
      prefix: r.prefix,
      name: r.name,
      createdAt: num(r.created_at),
      lastUsedAt: numOrNull(r.last_used_at),
      revokedAt: numOrNull(r.revoked_at),
      limits: { rpm: numOrNull(r.rpm), tpm: numOrNull(r.tpm) },
    }))
  }

  /** Sets the rate limits of one of the account's live keys (null: none); false when it has no such key. */
  setLimits(accountId: number, keyId: string, limits: RateLimits): Promise<boolean> {
    return this.updateLive(accountId, keyId, { rpm: limits.rpm, tpm: limits.tpm })
  }

  /** Revokes one of the account's keys; false when it has no such live key. */
  revoke(accountId: number, keyId: string, now: number): Promise<boolean> {
    return this.updateLive(accountId, keyId, { revoked_at: BigInt(now) })
  }

  /** Changes one of the account's live keys; false when it has no such key. */
  private async updateLive(
    accountId: number,
    keyId: string,
    set: { rpm?: number | null; tpm?: number | null; revoked_at?: bigint },
  ): Promise<boolean> {
    const r = await this.db
      .updateTable('api_keys')
      .set(set)
      .where('id', '=', keyId)
      .where('account_id', '=', accountId)
      .where('revoked_at', 'is', null)
      .returning('id')
      .executeTakeFirst()
    return r !== undefined
  }

  async touch(keyIds: string[], now: number): Promise<void> {
    if (keyIds.length === 0) return
    await this.db
      .updateTable('api_keys')
      .set({ last_used_at: BigInt(now) })
      .where('id', 'in', keyIds)
      .execute()
  }
}
