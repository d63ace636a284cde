import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { num } from './ints.js'

/** How long an idempotency key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000

/** What became of the first request that used an idempotency key. */
export type IdempotencyState = 'in_flight' | 'replayable' | 'stream'

export interface IdempotencyRecord {
  requestId: string
  bodyHash: string
  state: IdempotencyState
  reply: { status: number; body: string } | null
  createdAt: number
}

export interface ClaimRequest {
  keyId: string
  key: string
  requestId: string
  bodyHash: string
  now: number
}

/** Idempotency keys, shared by every gateway process: the first claim of a key wins, atomically. */
export class IdempotencyRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Claims the key for this request; when another request holds it (within 24 hours), that request's record. */
  async claim(c: ClaimRequest): Promise<IdempotencyRecord | 'claimed'> {
    const mine = this.db.deleteFrom('idempotency').where('key_id', '=', c.keyId).where('idem_key', '=', c.key)
    await mine.where('created_at', '<', BigInt(c.now - IDEMPOTENCY_TTL_MS)).execute()
    const inserted = await this.db
      .insertInto('idempotency')
      .values({
        key_id: c.keyId,
        idem_key: c.key,
        request_id: c.requestId,
        body_hash: c.bodyHash,
        state: 'in_flight',
        reply_status: null,
        reply_body: null,
        created_at: BigInt(c.now),
      })
      .onConflict((oc) => oc.columns(['key_id', 'idem_key']).doNothing())
      .executeTakeFirst()
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1) return 'claimed'
    const r = await this.db
      .selectFrom('idempotency')
      .selectAll()
      .where('key_id', '=', c.keyId)
      .where('idem_key', '=', c.key)
      .executeTakeFirst()
    // Pruned between the two statements: claim it again.
    if (!r) return this.claim(c)
    return {
      requestId: r.request_id,
      bodyHash: r.body_hash,
      state: r.state as IdempotencyState,
      createdAt: num(r.created_at),
      reply:
        r.reply_status === null || r.reply_body === null ? null : { status: num(r.reply_status), body: r.reply_body },
    }
  }

  /** Moves a claim from a request that charged nothing to a new one; false when another request took it first. */
  async takeOver(c: ClaimRequest, from: string): Promise<boolean> {
    const r = await this.db
      .updateTable('idempotency')
      .set({ request_id: c.requestId, created_at: BigInt(c.now) })
      .where('key_id', '=', c.keyId)
      .where('idem_key', '=', c.key)
      .where('request_id', '=', from)
      .executeTakeFirst()
    return Number(r.numUpdatedRows) === 1
  }

  /** The claim's request finished and was charged: its reply to send again, or a stream that cannot be. */
  async finish(
    keyId: string,
    key: string,
    requestId: string,
    reply: { status: number; body: string } | 'stream',
  ): Promise<void> {
    await this.db
      .updateTable('idempotency')
      .set(
        reply === 'stream'
          ? { state: 'stream' }
          : { state: 'replayable', reply_status: reply.status, reply_body: reply.body },
      )
      .where('key_id', '=', keyId)
      .where('idem_key', '=', key)
      .where('request_id', '=', requestId)
      .execute()
  }

  /** The claim's request charged nothing: the key is free for a retry. */
  async forget(keyId: string, key: string, requestId: string): Promise<void> {
    await this.db
      .deleteFrom('idempotency')
      .where('key_id', '=', keyId)
      .where('idem_key', '=', key)
      .where('request_id', '=', requestId)
      .execute()
  }

  /** Deletes the keys older than 24 hours; how many. */
  async prune(now: number): Promise<number> {
    const r = await this.db
      .deleteFrom('idempotency')
      .where('created_at', '<', BigInt(now - IDEMPOTENCY_TTL_MS))
      .executeTakeFirst()
    return Number(r.numDeletedRows)
  }
}
