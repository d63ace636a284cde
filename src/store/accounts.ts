import { sql, type Kysely, type Selectable, type SqlBool, type Transaction } from 'kysely'
import type { AccountsTable, Database } from './schema.js'
import { big, num } from './ints.js'

export interface Account {
  id: number
  address: string
  kind: AccountsTable['kind']
  status: AccountsTable['status']
  balance: bigint
  held: bigint
  cap: bigint
  debt: bigint
  createdAt: number
}

export { spendableOf } from '../money/spendable.js'

/**
 * The postings indexed by account (`postings_uncached`, migration 007): the books no account row caches, a payee's
 * pending earnings and settlements. A query by account must carry this condition, as written, to use the index.
 */
export const UNCACHED_POSTINGS = sql.raw<SqlBool>(`(book = 'pending' OR kind = 'settlement')`)

/** Money entering (or, negative, leaving) the ledger for an account, under `ref` at `now`. */
export interface WorldPosting {
  ref: string
  accountId: number
  kind: 'deposit' | 'chain' | 'x402' | 'x402_refund'
  amount: bigint
  now: number
}

/**
 * Money entering (or, negative, leaving) the ledger for an account: two available-book postings against the world
 * account.
 */
export async function postFromWorld(
  trx: Transaction<Database>,
  { ref, accountId, kind, amount, now }: WorldPosting,
): Promise<void> {
  const world = await trx
    .selectFrom('accounts')
    .select('id')
    .where('address', '=', SYSTEM_ACCOUNTS.world)
    .executeTakeFirstOrThrow()
  const created_at = BigInt(now)
  await trx
    .insertInto('posting_rows')
    .values([
      { ref, account_id: accountId, book: 'available', kind, amount, created_at },
      { ref, account_id: num(world.id), book: 'available', kind, amount: -amount, created_at },
    ])
    .execute()
}

export function toAccount(r: Selectable<AccountsTable>): Account {
  return {
    id: num(r.id),
    address: r.address,
    kind: r.kind,
    status: r.status,
    balance: big(r.balance),
    held: big(r.held),
    cap: big(r.cap),
    debt: big(r.debt),
    createdAt: num(r.created_at),
  }
}

export const SYSTEM_ACCOUNTS = { fees: 'svc:fees', vendor: 'svc:vendor', world: 'svc:world' } as const

export class AccountRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Creates the account when missing; returns it and whether it was created now. */
  async ensure(address: string, kind: Account['kind'], now: number): Promise<{ account: Account; created: boolean }> {
    const inserted = await this.db
      .insertInto('accounts')
      .values({ address, kind, status: 'active', balance: 0n, held: 0n, cap: 0n, debt: 0n, created_at: BigInt(now) })
      .onConflict((oc) => oc.column('address').doNothing())
      .returningAll()
      .executeTakeFirst()
    if (inserted) return { account: toAccount(inserted), created: true }
    const existing = await this.byAddress(address)
    if (!existing) throw new Error(`account ${address} vanished`)
    return { account: existing, created: false }
  }

  async byAddress(address: string): Promise<Account | undefined> {
    const r = await this.db.selectFrom('accounts').selectAll().where('address', '=', address).executeTakeFirst()
    return r && toAccount(r)
  }

  async byId(id: number): Promise<Account | undefined> {
    const r = await this.db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst()
    return r && toAccount(r)
  }

  async setStatus(id: number, status: Account['status']): Promise<void> {
    await this.db.updateTable('accounts').set({ status }).where('id', '=', id).execute()
  }

  /** Sets the remaining approved cap, as an ERC-20 `approve` sets an allowance. */
  async approve(id: number, cap: bigint): Promise<void> {
    await this.db.updateTable('accounts').set({ cap }).where('id', '=', id).execute()
  }

  /**
   * Credits a deposit: two postings (world → account) and the cached balance, in one transaction; null (nothing
   * written) when the balance would pass `max`.
   */
  async deposit({
    id,
    amount,
    ref,
    now,
    max,
  }: {
    id: number
    amount: bigint
    ref: string
    now: number
    max?: bigint
  }): Promise<Account | null> {
    return this.db.transaction().execute(async (trx) => {
      let update = trx
        .updateTable('accounts')
        .set({ balance: sql`balance + ${amount}` })
        .where('id', '=', id)
      if (max !== undefined) update = update.where('balance', '<=', max - amount)
      const r = await update.returningAll().executeTakeFirst()
      if (!r) return null
      await postFromWorld(trx, { ref, accountId: id, kind: 'deposit', amount, now })
      return toAccount(r)
    })
  }

  /**
   * Sums of an account's books, derived from postings (payees are not cached: no hot row on every capture). Reads
   * every posting: only the uncached books are indexed by account (`UNCACHED_POSTINGS`). For audits and tests; a
   * payee's figures come from `SettlementRepo.payeeTotals`.
   */
  async books(id: number): Promise<Record<'available' | 'held' | 'pending', bigint>> {
    const rows = await this.db
      .selectFrom('postings')
      .select(['book', (eb) => eb.fn.sum<bigint | null>('amount').as('total')])
      .where('account_id', '=', id)
      .groupBy('book')
      .execute()
    const out = { available: 0n, held: 0n, pending: 0n }
    for (const r of rows) out[r.book] = big(r.total ?? 0)
    return out
  }
}
