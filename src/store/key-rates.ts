import { sql, type Kysely } from 'kysely'
import type { Database } from './schema.js'
import type { RateLimits } from './keys.js'
import { num } from './ints.js'
import type { RateAnswer, RateCounter } from '../limits/counter.js'

/** Per-key counts per minute in the store (`key_rates`): the rate counter where the config names no Redis. */
export class KeyRatesRepo implements RateCounter {
  constructor(private readonly db: Kysely<Database>) {}

  /** One conditional upsert: a row counted only when the limits leave room, in any number of processes at once. */
  async take(keyId: string, minute: number, limits: RateLimits, tokens: number): Promise<RateAnswer> {
    const rpm = limits.rpm ?? -1
    const tpm = limits.tpm ?? -1
    // Every number is cast: Postgres would compare two untyped parameters as text.
    const n = (v: number) => sql`CAST(${v} AS BIGINT)`
    const counted = await sql<{ requests: number | bigint; tokens: number | bigint }>`
      INSERT INTO key_rates (key_id, minute, requests, tokens)
      SELECT ${keyId}, ${n(minute)}, 1, ${n(tokens)} WHERE ${n(rpm)} <> 0 AND (${n(tpm)} < 0 OR ${n(tokens)} <= ${n(tpm)})
      ON CONFLICT (key_id, minute) DO UPDATE SET
        requests = key_rates.requests + 1, tokens = key_rates.tokens + excluded.tokens
      WHERE (${n(rpm)} < 0 OR key_rates.requests + 1 <= ${n(rpm)})
        AND (${n(tpm)} < 0 OR key_rates.tokens + excluded.tokens <= ${n(tpm)})
      RETURNING requests, tokens`.execute(this.db)
    const row = counted.rows[0]
    if (row) return { taken: true, count: { requests: num(row.requests), tokens: num(row.tokens) } }
    const now = await this.db
      .selectFrom('key_rates')
      .select(['requests', 'tokens'])
      .where('key_id', '=', keyId)
      .where('minute', '=', BigInt(minute))
      .executeTakeFirst()
    return { taken: false, count: { requests: num(now?.requests ?? 0), tokens: num(now?.tokens ?? 0n) } }
  }

  async correct(keyId: string, minute: number, delta: number): Promise<void> {
    await this.db
      .updateTable('key_rates')
      .set((eb) => ({ tokens: eb('tokens', '+', BigInt(delta)) }))
      .where('key_id', '=', keyId)
      .where('minute', '=', BigInt(minute))
      .execute()
  }

  /** Deletes the counts of minutes before `minute`. */
  async prune(minute: number): Promise<void> {
    await this.db.deleteFrom('key_rates').where('minute', '<', BigInt(minute)).execute()
  }

  async close(): Promise<void> {}
}
