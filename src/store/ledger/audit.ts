import { sql, type Kysely, type Transaction } from 'kysely'
import type { Database } from '../schema.js'
import { big, num } from '../ints.js'

export interface LedgerAudit {
  /** Refs whose postings do not sum to zero. */
  unbalanced: { ref: string; sum: bigint }[]
  /** Accounts whose cached balance or held differ from their postings, or that went negative. */
  inconsistent: { address: string; balance: bigint; held: bigint; postedBalance: bigint; postedHeld: bigint }[]
  openHolds: number
}

/** Checks the ledger's invariants within one read transaction: every ref nets to zero; cached figures match. */
export async function auditIn(db: Transaction<Database>): Promise<LedgerAudit> {
  const unbalanced = await db
    .selectFrom('postings')
    .select(['ref', (eb) => eb.fn.sum<bigint>('amount').as('sum')])
    .groupBy('ref')
    .having((eb) => eb.fn.sum('amount'), '<>', 0)
    .execute()
  // One pass over the postings (they are not indexed by account for the books an account row caches), then the
  // users' cached figures beside them.
  const posted = new Map<number, { balance: bigint; held: bigint }>()
  const sums = await db
    .selectFrom('postings')
    .select([
      'account_id',
      sql<bigint>`coalesce(sum(case when book in ('available','held') then amount else 0 end), 0)`.as('balance'),
      sql<bigint>`coalesce(sum(case when book = 'held' then amount else 0 end), 0)`.as('held'),
    ])
    .groupBy('account_id')
    .execute()
  for (const r of sums) posted.set(num(r.account_id), { balance: big(r.balance), held: big(r.held) })
  // Open holds have no postings yet: they are counted by their instances.
  const counted = await db
    .selectFrom('owner_holds')
    .select(['account_id', sql<bigint>`sum(held)`.as('held')])
    .groupBy('account_id')
    .execute()
  for (const r of counted) {
    const p = posted.get(num(r.account_id)) ?? { balance: 0n, held: 0n }
    posted.set(num(r.account_id), { balance: p.balance, held: p.held + big(r.held) })
  }
  const users = await db
    .selectFrom('accounts')
    .select(['id', 'address', 'balance', 'held'])
    .where('kind', 'in', ['user', 'prepaid'])
    .execute()
  const inconsistent = users
    .map((r) => {
      const p = posted.get(num(r.id))
      return {
        address: r.address,
        balance: big(r.balance),
        held: big(r.held),
        postedBalance: p?.balance ?? 0n,
        postedHeld: p?.held ?? 0n,
      }
    })
    .filter((r) => r.balance !== r.postedBalance || r.held !== r.postedHeld || r.balance < 0n || r.held < 0n)
  return {
    unbalanced: unbalanced.map((r) => ({ ref: r.ref, sum: big(r.sum) })),
    inconsistent,
    openHolds: await openHoldsIn(db),
  }
}

export async function openHoldsIn(db: Kysely<Database>, accountId?: number): Promise<number> {
  let counted = db.selectFrom('owner_holds').select(sql<bigint>`coalesce(sum(open), 0)`.as('n'))
  let rows = db
    .selectFrom('holds')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('status', '=', sql.lit('open'))
  if (accountId !== undefined) {
    counted = counted.where('account_id', '=', accountId)
    rows = rows.where('account_id', '=', accountId)
  }
  return num((await counted.executeTakeFirstOrThrow()).n) + num((await rows.executeTakeFirstOrThrow()).n)
}
