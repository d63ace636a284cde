import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { num } from './ints.js'

/** How many requests of one key and model were refused with one code in one minute. */
export interface RefusalCount {
  accountId: number
  keyId: string
  model: string
  code: string
  /** The minute's start, in ms. */
  minute: number
  count: number
}

/** Refusals before admission, counted per account, key, model, code and minute (not a record each). */
export class RefusalRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Adds the counts to their minutes' rows, in one transaction. */
  async add(counts: RefusalCount[]): Promise<void> {
    if (counts.length === 0) return
    await this.db.transaction().execute(async (trx) => {
      for (const c of counts) {
        await trx
          .insertInto('refusal_counts')
          .values({
            account_id: c.accountId,
            key_id: c.keyId,
            model: c.model,
            code: c.code,
            minute: BigInt(c.minute),
            count: BigInt(c.count),
          })
          .onConflict((oc) =>
            oc
              .columns(['account_id', 'key_id', 'model', 'code', 'minute'])
              .doUpdateSet((eb) => ({ count: eb('refusal_counts.count', '+', eb.ref('excluded.count')) })),
          )
          .execute()
      }
    })
  }

  /** An account's counts since `since` (ms), newest minute first. */
  async list(accountId: number, since: number, limit: number): Promise<RefusalCount[]> {
    const rows = await this.db
      .selectFrom('refusal_counts')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('minute', '>=', BigInt(since))
      .orderBy('minute', 'desc')
      .orderBy('key_id')
      .orderBy('model')
      .orderBy('code')
      .limit(limit)
      .execute()
    return rows.map((r) => ({
      accountId: num(r.account_id),
      keyId: r.key_id,
      model: r.model,
      code: r.code,
      minute: num(r.minute),
      count: num(r.count),
    }))
  }
}
