import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import type { StoreDialect } from './dialect.js'
import { big, bigOrNull, num, numOrNull } from './ints.js'
import { periodStart } from '../limits/period.js'
import type { KeyLimits, LimitReset } from '../limits/limits.js'

/** A key's limits from its row. */
function limitsOf(r: { rpm: unknown; tpm: unknown; spend_limit: unknown; limit_reset: string }): KeyLimits {
  const limit = bigOrNull(r.spend_limit)
  return {
    rpm: numOrNull(r.rpm),
    tpm: numOrNull(r.tpm),
    spend: limit === null ? null : { limit, reset: r.limit_reset as LimitReset },
  }
}

export interface ApiKey {
  id: string
  accountId: number
  prefix: string
  name: string
  createdAt: number
  lastUsedAt: number | null
  revokedAt: number | null
  limits: KeyLimits
  /** Spend counters (kept while the key has a spend limit): `spentNow` tells what the period that holds now spent. */
  period: { start: number; spent: bigint; held: bigint }
}

export interface KeyOwner {
  keyId: string
  accountId: number
  address: string
  accountStatus: 'active' | 'suspended'
  revoked: boolean
  limits: KeyLimits
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
    k: { id: string; accountId: number; hash: string; prefix: string; name: string; now: number; limits?: KeyLimits },
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
          spend_limit: k.limits?.spend?.limit ?? null,
          limit_reset: k.limits?.spend?.reset ?? 'none',
          period_start: BigInt(periodStart(k.limits?.spend?.reset ?? 'none', k.now)),
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
        'api_keys.spend_limit as spend_limit',
        'api_keys.limit_reset as limit_reset',
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
      limits: limitsOf(r),
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
      limits: limitsOf(r),
      period: { start: num(r.period_start), spent: big(r.period_spent), held: big(r.period_held) },
    }))
  }

  /**
   * Sets the limits of one of the account's live keys (null: none); false when it has no such key. A spend limit set
   * anew, or with another reset, starts from what the key's requests were charged in the period that holds `now`.
   */
  setLimits(accountId: number, keyId: string, limits: KeyLimits, now: number): Promise<boolean> {
    const { spend } = limits
    return this.db.transaction().execute(async (trx) => {
      const row = await this.dialect
        .forUpdate(
          trx
            .selectFrom('api_keys')
            .select(['spend_limit', 'limit_reset'])
            .where('id', '=', keyId)
            .where('account_id', '=', accountId)
            .where('revoked_at', 'is', null),
        )
        .executeTakeFirst()
      if (!row) return false
      const recount = spend !== null && (row.spend_limit === null || row.limit_reset !== spend.reset)
      const start = recount ? periodStart(spend.reset, now) : 0
      const spent = recount
        ? await trx
            .selectFrom('holds')
            .select((eb) => eb.fn.coalesce(eb.fn.sum<bigint>('cost'), eb.val(0n)).as('spent'))
            .where('key_id', '=', keyId)
            .where('status', '=', 'captured')
            .where('closed_at', '>=', BigInt(start))
            .executeTakeFirstOrThrow()
        : undefined
      await trx
        .updateTable('api_keys')
        .set({
          rpm: limits.rpm,
          tpm: limits.tpm,
          spend_limit: spend?.limit ?? null,
          limit_reset: spend?.reset ?? 'none',
          ...(spent ? { period_start: BigInt(start), period_spent: big(spent.spent) } : {}),
        })
        .where('id', '=', keyId)
        .execute()
      return true
    })
  }

  /** Revokes one of the account's keys; false when it has no such live key. */
  revoke(accountId: number, keyId: string, now: number): Promise<boolean> {
    return this.updateLive(accountId, keyId, { revoked_at: BigInt(now) })
  }

  /** Changes one of the account's live keys; false when it has no such key. */
  private async updateLive(accountId: number, keyId: string, set: { revoked_at: bigint }): Promise<boolean> {
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
