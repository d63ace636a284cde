import { CompiledQuery, type Kysely } from 'kysely'
import type { Database } from './schema.js'
import type { RateLimits } from '../limits/limits.js'
import { num } from './ints.js'
import type { RateAnswer, RateCount, RateCounter, RateTake } from '../limits/counter.js'

const N = 'CAST(? AS BIGINT)'

/**
 * One conditional upsert: `requests` requests of `tokens` in all counted in the key's minute only when its limits (-1:
 * none) leave room for all of them, in any number of processes at once. Every number is cast: Postgres would compare
 * untyped parameters as text. `takeValues` fills it.
 */
export const TAKE_SQL = `INSERT INTO key_rates (key_id, minute, requests, tokens)
  SELECT ?, ${N}, ${N}, ${N} WHERE (${N} < 0 OR ${N} <= ${N}) AND (${N} < 0 OR ${N} <= ${N})
  ON CONFLICT (key_id, minute) DO UPDATE SET
    requests = key_rates.requests + excluded.requests, tokens = key_rates.tokens + excluded.tokens
  WHERE (${N} < 0 OR key_rates.requests + excluded.requests <= ${N})
    AND (${N} < 0 OR key_rates.tokens + excluded.tokens <= ${N})
  RETURNING requests, tokens`

/** The values of TAKE_SQL's parameters, in order: one request of `tokens`, or `requests` of `tokens` in all. */
export function takeValues(keyId: string, { minute, limits, tokens }: RateTake, requests = 1): (string | number)[] {
  const rpm = limits.rpm ?? -1
  const tpm = limits.tpm ?? -1
  return [keyId, minute, requests, tokens, rpm, requests, rpm, tpm, tokens, tpm, rpm, rpm, tpm, tpm]
}

/** Per-key counts per minute in the store (`key_rates`): the rate counter where the config names no Redis. */
export class KeyRatesRepo implements RateCounter {
  private readonly take$: string

  /** `numbered`: parameters as `$1, $2 …` (Postgres) rather than `?`. */
  constructor(
    private readonly db: Kysely<Database>,
    numbered = false,
  ) {
    let n = 0
    this.take$ = numbered ? TAKE_SQL.replaceAll('?', () => `$${++n}`) : TAKE_SQL
  }

  async take(keyId: string, minute: number, limits: RateLimits, tokens: number): Promise<RateAnswer> {
    const counted = await this.db.executeQuery<{ requests: number | bigint; tokens: number | bigint }>(
      CompiledQuery.raw(this.take$, takeValues(keyId, { minute, limits, tokens })),
    )
    const row = counted.rows[0]
    if (row) return { taken: true, count: { requests: num(row.requests), tokens: num(row.tokens) } }
    return { taken: false, count: await this.peek(keyId, minute) }
  }

  async peek(keyId: string, minute: number): Promise<RateCount> {
    const row = await this.db
      .selectFrom('key_rates')
      .select(['requests', 'tokens'])
      .where('key_id', '=', keyId)
      .where('minute', '=', BigInt(minute))
      .executeTakeFirst()
    return { requests: num(row?.requests ?? 0), tokens: num(row?.tokens ?? 0n) }
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
