import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { num, numOrNull } from './dialect.js'

export interface ApiKey {
  id: string
  accountId: number
  prefix: string
  name: string
  createdAt: number
  lastUsedAt: number | null
  revokedAt: number | null
}

export interface KeyOwner {
  keyId: string
  accountId: number
  address: string
  accountStatus: 'active' | 'suspended'
  revoked: boolean
}

export class KeyRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(k: { id: string; accountId: number; hash: string; prefix: string; name: string; now: number }): Promise<void> {
    await this.db
      .insertInto('api_keys')
      .values({ id: k.id, account_id: k.accountId, hash: k.hash, prefix: k.prefix, name: k.name, created_at: BigInt(k.now), last_used_at: null, revoked_at: null })
      .execute()
  }

  /** The key with this hash and its account, or undefined. */
  async ownerOf(hash: string): Promise<KeyOwner | undefined> {
    const r = await this.db
      .selectFrom('api_keys')
      .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
      .select(['api_keys.id as keyId', 'api_keys.account_id as accountId', 'api_keys.revoked_at as revokedAt', 'accounts.status as status', 'accounts.address as address'])
      .where('api_keys.hash', '=', hash)
      .executeTakeFirst()
    if (!r) return undefined
    return { keyId: r.keyId, accountId: num(r.accountId), address: r.address, accountStatus: r.status, revoked: r.revokedAt !== null }
  }

  async list(accountId: number): Promise<ApiKey[]> {
    const rows = await this.db.selectFrom('api_keys').selectAll().where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id').execute()
    return rows.map((r) => ({
      id: r.id,
      accountId: num(r.account_id),
      prefix: r.prefix,
      name: r.name,
      createdAt: num(r.created_at),
      lastUsedAt: numOrNull(r.last_used_at),
      revokedAt: numOrNull(r.revoked_at),
    }))
  }

  /** Revokes one of the account's keys; false when it has no such live key. */
  async revoke(accountId: number, keyId: string, now: number): Promise<boolean> {
    const r = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: BigInt(now) })
      .where('id', '=', keyId)
      .where('account_id', '=', accountId)
      .where('revoked_at', 'is', null)
      .returning('id')
      .executeTakeFirst()
    return r !== undefined
  }

  async touch(keyIds: string[], now: number): Promise<void> {
    if (keyIds.length === 0) return
    await this.db.updateTable('api_keys').set({ last_used_at: BigInt(now) }).where('id', 'in', keyIds).execute()
  }
}
