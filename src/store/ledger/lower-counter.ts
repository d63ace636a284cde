import type { Kysely, Transaction } from 'kysely'
import type { Database } from '../schema.js'
import type { StoreDialect } from '../dialect.js'
import { big, num } from '../ints.js'

/** Longest a statement of `lowerCounter` waits on Postgres (for a row lock, mostly). */
const LOWER_TIMEOUT_MS = 5_000

/** What an instance still holds under one of its counters: on the account, and per key with a spend limit. */
export interface Left {
  held: bigint
  open: number
  keys: ReadonlyMap<string, bigint>
}

export const NOTHING_LEFT: Left = { held: 0n, open: 0, keys: new Map() }

/**
 * Lowers an instance's counter on an account to what it still holds there (`to`, read once both rows are locked), the
 * rest back to the account's `held`, and its counters of the account's keys with it (the rest out of each key's
 * `period_held`); `dead` marks it as never holding again. Returns how many holds it let go. For a gone instance (to
 * nothing, dead) and a live one's recount (to its memory, `Recount`): docs/architecture.md §15.27.
 */
export function lowerCounter(
  db: Kysely<Database>,
  dialect: StoreDialect,
  c: { owner: string; accountId: number; dead: boolean },
  to: () => Left,
): Promise<number> {
  const { owner, accountId, dead } = c
  return db.transaction().execute(async (trx) => {
    await dialect.boundStatements(trx, LOWER_TIMEOUT_MS)
    await dialect.forUpdate(trx.selectFrom('accounts').select('id').where('id', '=', accountId)).execute()
    const counted = await dialect
      .forUpdate(
        trx
          .selectFrom('owner_holds')
          .select(['held', 'open'])
          .where('owner', '=', owner)
          .where('account_id', '=', accountId)
          .where('dead', '=', 0),
      )
      .executeTakeFirst()
    const left = to()
    if (!counted || (big(counted.held) <= left.held && !dead)) return 0
    await trx
      .updateTable('accounts')
      .set((eb) => ({ held: eb('held', '-', big(counted.held) - left.held) }))
      .where('id', '=', accountId)
      .execute()
    await trx
      .updateTable('owner_holds')
      .set({ held: left.held, open: left.open, dead: dead ? 1 : 0 })
      .where('owner', '=', owner)
      .where('account_id', '=', accountId)
      .execute()
    await lowerKeys(trx, dialect, c, left.keys)
    return Math.max(0, num(counted.open) - left.open)
  })
}

/**
 * Lowers the instance's counters of the account's keys to what it still holds (`left`), each key's with it; a dead
 * instance's go.
 */
async function lowerKeys(
  trx: Transaction<Database>,
  dialect: StoreDialect,
  { owner, accountId, dead }: { owner: string; accountId: number; dead: boolean },
  left: ReadonlyMap<string, bigint>,
): Promise<void> {
  const keys = trx.selectFrom('api_keys').select('id').where('account_id', '=', accountId)
  const counters = await dialect
    .forUpdate(
      trx.selectFrom('key_holds').select(['key_id', 'held']).where('owner', '=', owner).where('key_id', 'in', keys),
    )
    .execute()
  for (const k of counters) {
    const extra = big(k.held) - (left.get(k.key_id) ?? 0n)
    if (extra <= 0n) continue
    await trx
      .updateTable('api_keys')
      .set((eb) => ({
        period_held: eb
          .case()
          .when('period_held', '>', extra)
          .then(eb('period_held', '-', extra))
          .else(0n)
          .end(),
      }))
      .where('id', '=', k.key_id)
      .execute()
    if (dead) await trx.deleteFrom('key_holds').where('owner', '=', owner).where('key_id', '=', k.key_id).execute()
    else
      await trx
        .updateTable('key_holds')
        .set({ held: big(k.held) - extra })
        .where('owner', '=', owner)
        .where('key_id', '=', k.key_id)
        .execute()
  }
}
