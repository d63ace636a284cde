import { sql, type Expression, type Kysely, type RawBuilder } from 'kysely'
import type { Database } from './schema.js'
import type { RateLimits } from '../limits/limits.js'
import { num } from './ints.js'
import type { RateAnswer, RateCount, RateCounter, RateTake } from '../limits/counter.js'

/** What one take binds: `requests` requests of `tokens` in all, in the key's minute, under its limits (-1: none). */
export interface TakeValues {
  keyId: string
  minute: number
  requests: number
  tokens: number
  rpm: number
  tpm: number
}

/** The values of one request's take of `tokens`, or of `requests` requests' of `tokens` in all. */
export function takeValues(keyId: string, { minute, limits, tokens }: RateTake, requests = 1): TakeValues {
  return { keyId, minute, requests, tokens, rpm: limits.rpm ?? -1, tpm: limits.tpm ?? -1 }
}

/** Each take value as an expression of the statement: bound values, or a prepared statement's named parameters. */
export type TakeTerms = { [K in keyof TakeValues]: Expression<TakeValues[K]> }

/** Bound values, for a statement built per take. */
export const boundTerms = (v: TakeValues): TakeTerms => ({
  keyId: sql.val(v.keyId),
  minute: sql.val(v.minute),
  requests: sql.val(v.requests),
  tokens: sql.val(v.tokens),
  rpm: sql.val(v.rpm),
  tpm: sql.val(v.tpm),
})

/** Every number is cast: Postgres would compare an untyped parameter as text. */
const big = <T extends number | bigint = number>(e: Expression<number>): RawBuilder<T> => sql<T>`cast(${e} as bigint)`

/**
 * One conditional upsert: the take counted in the key's minute only when its limits leave room for all of it, in any
 * number of processes at once; it returns the minute's counts when it counted, no row when it did not.
 */
export function takeQuery(db: Kysely<Database>, t: TakeTerms) {
  const [requests, rpm] = [big(t.requests), big(t.rpm)]
  const [tokens, tpm] = [big<bigint>(t.tokens), big<bigint>(t.tpm)]
  const [none, noneBig] = [sql<number>`0`, sql<bigint>`0`]
  return db
    .insertInto('key_rates')
    .columns(['key_id', 'minute', 'requests', 'tokens'])
    .expression(
      db
        .selectNoFrom([
          sql<string>`${t.keyId}`.as('key_id'),
          big(t.minute).as('minute'),
          requests.as('requests'),
          tokens.as('tokens'),
        ])
        .where((eb) =>
          eb.and([
            eb.or([eb(rpm, '<', none), eb(requests, '<=', rpm)]),
            eb.or([eb(tpm, '<', noneBig), eb(tokens, '<=', tpm)]),
          ]),
        ),
    )
    .onConflict((oc) =>
      oc
        .columns(['key_id', 'minute'])
        .doUpdateSet((eb) => ({
          requests: eb('key_rates.requests', '+', eb.ref('excluded.requests')),
          tokens: eb('key_rates.tokens', '+', eb.ref('excluded.tokens')),
        }))
        .where((eb) =>
          eb.and([
            eb.or([eb(rpm, '<', none), eb(eb('key_rates.requests', '+', eb.ref('excluded.requests')), '<=', rpm)]),
            eb.or([eb(tpm, '<', noneBig), eb(eb('key_rates.tokens', '+', eb.ref('excluded.tokens')), '<=', tpm)]),
          ]),
        ),
    )
    .returning(['key_rates.requests', 'key_rates.tokens'])
}

/** Per-key counts per minute in the store (`key_rates`): the rate counter where the config names no Redis. */
export class KeyRatesRepo implements RateCounter {
  constructor(private readonly db: Kysely<Database>) {}

  async take(keyId: string, minute: number, limits: RateLimits, tokens: number): Promise<RateAnswer> {
    const row = await takeQuery(this.db, boundTerms(takeValues(keyId, { minute, limits, tokens }))).executeTakeFirst()
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
