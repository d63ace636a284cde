import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { num } from './ints.js'

export interface PortalSession {
  /** SHA-256 of the cookie's secret. */
  id: string
  accountId: number
  address: string
  csrf: string
  createdAt: number
  expiresAt: number
}

export type NonceUse = 'ok' | 'unknown' | 'expired'

/** Sign-in nonces (single use, with expiry) and portal sessions, shared by every gateway process. */
export class PortalRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Stores a fresh nonce; expired ones are swept on the way so the table stays small. */
  async issueNonce(nonce: string, now: number, expiresAt: number): Promise<void> {
    await this.db.deleteFrom('portal_nonces').where('expires_at', '<=', BigInt(now)).execute()
    await this.db
      .insertInto('portal_nonces')
      .values({ nonce, created_at: BigInt(now), expires_at: BigInt(expiresAt) })
      .execute()
  }

  /** Uses a nonce up: one atomic delete, so two sign-ins racing with the same nonce cannot both succeed. */
  async consumeNonce(nonce: string, now: number): Promise<NonceUse> {
    const r = await this.db
      .deleteFrom('portal_nonces')
      .where('nonce', '=', nonce)
      .returning('expires_at')
      .executeTakeFirst()
    if (!r) return 'unknown'
    return num(r.expires_at) > now ? 'ok' : 'expired'
  }

  async createSession(s: PortalSession): Promise<void> {
    await this.db.deleteFrom('portal_sessions').where('expires_at', '<=', BigInt(s.createdAt)).execute()
    await this.db
      .insertInto('portal_sessions')
      .values({
        id: s.id,
        account_id: s.accountId,
        address: s.address,
        csrf: s.csrf,
        created_at: BigInt(s.createdAt),
        expires_at: BigInt(s.expiresAt),
      })
      .execute()
  }

  /** The live session with this id, or undefined when unknown, signed out or expired. */
  async session(id: string, now: number): Promise<PortalSession | undefined> {
    const r = await this.db
      .selectFrom('portal_sessions')
      .selectAll()
      .where('id', '=', id)
      .where('expires_at', '>', BigInt(now))
      .executeTakeFirst()
    return (
      r && {
        id: r.id,
        accountId: num(r.account_id),
        address: r.address,
        csrf: r.csrf,
        createdAt: num(r.created_at),
        expiresAt: num(r.expires_at),
      }
    )
  }

  async deleteSession(id: string): Promise<void> {
    await this.db.deleteFrom('portal_sessions').where('id', '=', id).execute()
  }
}
