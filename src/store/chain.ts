import { sql, type Kysely, type Transaction } from 'kysely'
import type { Database } from './schema.js'
import type { StoreDialect } from './dialect.js'
import { postFromWorld, toAccount, type Account } from './accounts.js'
import { big, num } from './ints.js'

/** Integer columns are signed 64-bit: an "unlimited" ERC-20 allowance (2^256 − 1) is stored as this. */
export const MAX_STORED = 2n ** 63n - 1n

/** A wallet as read from the chain at one block. */
export interface WalletRead {
  balance: bigint
  allowance: bigint
  block: bigint
}

export interface ChainWallet extends WalletRead {
  accountId: number
  floor: bigint
  syncedAt: number
}

export type SyncResult =
  { kind: 'stale' } | { kind: 'synced'; account: Account; delta: bigint; owed: bigint; debtCleared: boolean }

/**
 * Where a batch's transaction was mined (the block's number and hash) and the payers the contract could not collect.
 */
export interface Landing {
  txHash: string
  block: bigint
  blockHash: string
  failedPayers: string[]
}

const clamp = (v: bigint) => (v < 0n ? 0n : v > MAX_STORED ? MAX_STORED : v)

/**
 * An account's balance and cap for a wallet read: the wallet and the allowance, each minus what is owed; but the
 * balance never goes below what open holds reserve (`held`), and the cap is then at most what the wallet covers, so
 * spendable stays what the wallet covers (docs/architecture.md §15.24).
 */
export function walletFigures(
  read: Pick<WalletRead, 'balance' | 'allowance'>,
  owed: bigint,
  held: bigint,
): { balance: bigint; cap: bigint } {
  const covered = clamp(read.balance - owed)
  const cap = clamp(read.allowance - owed)
  if (covered >= held) return { balance: covered, cap }
  return { balance: held, cap: covered < cap ? covered : cap }
}

/**
 * The ledger side of the evm rail: an account's balance is its wallet's minus what it owes, its cap the allowance to
 * the settler minus the same (`walletFigures`); this repository brings the cached row there with `chain` postings
 * against svc:world, netting to zero, and records what the watcher read (docs/architecture.md §15.24).
 */
export class ChainRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {}

  /** Captured charges of an account not yet settled on chain (including charges a failed batch returned). */
  async owed(accountId: number): Promise<bigint> {
    return owedIn(this.db, accountId)
  }

  /**
   * Brings an account to its wallet at `read.block`, in one transaction with the account row locked (a concurrent
   * capture is counted exactly once); a read older than the last, or than a batch mined for this payer, is stale and
   * changes nothing. A debt is cleared once the wallet covers all that is owed (the figures: `walletFigures`).
   */
  async sync(accountId: number, read: WalletRead, ref: string, now: number): Promise<SyncResult> {
    return this.db.transaction().execute(async (trx) => {
      const q = this.dialect.forUpdate(trx.selectFrom('accounts').selectAll().where('id', '=', accountId))
      const before = toAccount(await q.executeTakeFirstOrThrow())
      // Owed before the floor: a batch settled after this read raised the floor before (recordMined precedes
      // markSettled), so the read below sees it and refuses the stale wallet state; settled later, owed still has it.
      const owed = await owedIn(trx, accountId)
      const prev = await trx
        .selectFrom('chain_wallets')
        .selectAll()
        .where('account_id', '=', accountId)
        .executeTakeFirst()
      if (prev && (read.block < big(prev.block) || read.block < big(prev.floor))) return { kind: 'stale' as const }
      const { balance, cap } = walletFigures(read, owed, before.held)
      const delta = balance - before.balance
      const debtCleared = before.debt > 0n && read.balance >= owed && read.allowance >= owed
      if (delta !== 0n) await postFromWorld(trx, { ref, accountId, kind: 'chain', amount: delta, now })
      const after = await trx
        .updateTable('accounts')
        .set({ balance: sql`balance + ${delta}`, cap, ...(debtCleared ? { debt: 0n } : {}) })
        .where('id', '=', accountId)
        .returningAll()
        .executeTakeFirstOrThrow()
      const row = {
        balance: clamp(read.balance),
        allowance: clamp(read.allowance),
        block: read.block,
        synced_at: BigInt(now),
      }
      await trx
        .insertInto('chain_wallets')
        .values({ account_id: accountId, ...row, floor: 0n })
        .onConflict((oc) => oc.column('account_id').doUpdateSet(row))
        .execute()
      return { kind: 'synced' as const, account: toAccount(after), delta, owed, debtCleared }
    })
  }

  /**
   * Records where a batch's transaction was seen mined and what the contract reported, before it is confirmed: a
   * restart confirms it from this, whatever history the node has forgotten by then.
   */
  async recordLanded(batchId: string, l: Landing): Promise<void> {
    await this.db
      .updateTable('batches')
      .set({
        tx_hash: l.txHash,
        block: l.block,
        block_hash: l.blockHash,
        failed_payers: JSON.stringify(l.failedPayers),
      })
      .where('id', '=', batchId)
      .where('status', 'in', ['open', 'sent'])
      .execute()
  }

  /** What `recordLanded` recorded for a batch; null when its transaction was never seen mined. */
  async landed(batchId: string): Promise<Landing | null> {
    const r = await this.db
      .selectFrom('batches')
      .select(['tx_hash', 'block', 'block_hash', 'failed_payers'])
      .where('id', '=', batchId)
      .executeTakeFirst()
    if (!r || r.tx_hash === null || r.block === null || r.block_hash === null || r.failed_payers === null) return null
    return {
      txHash: r.tx_hash,
      block: big(r.block),
      blockHash: r.block_hash,
      failedPayers: JSON.parse(r.failed_payers) as string[],
    }
  }

  /** Records the block a batch was mined in and makes older wallet reads of its payers stale. */
  async recordMined(batchId: string, block: bigint, payerIds: number[]): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx.updateTable('batches').set({ block }).where('id', '=', batchId).execute()
      if (payerIds.length === 0) return
      await trx
        .updateTable('chain_wallets')
        .set({ floor: block })
        .where('account_id', 'in', payerIds)
        .where('floor', '<', block)
        .execute()
    })
  }

  async wallet(accountId: number): Promise<ChainWallet | undefined> {
    const r = await this.db
      .selectFrom('chain_wallets')
      .selectAll()
      .where('account_id', '=', accountId)
      .executeTakeFirst()
    return (
      r && {
        accountId: num(r.account_id),
        balance: big(r.balance),
        allowance: big(r.allowance),
        block: big(r.block),
        floor: big(r.floor),
        syncedAt: num(r.synced_at),
      }
    )
  }

  /** User accounts (wallets that pay), all of them or those among `addresses` (EIP-55). */
  async payers(addresses?: string[]): Promise<{ id: number; address: string }[]> {
    if (addresses && addresses.length === 0) return []
    let q = this.db.selectFrom('accounts').select(['id', 'address']).where('kind', '=', 'user')
    if (addresses) q = q.where('address', 'in', addresses)
    return (await q.orderBy('id').execute()).map((r) => ({ id: num(r.id), address: r.address }))
  }

  /** User accounts the watcher has never read. */
  async unsynced(): Promise<{ id: number; address: string }[]> {
    const rows = await this.db
      .selectFrom('accounts')
      .leftJoin('chain_wallets', 'chain_wallets.account_id', 'accounts.id')
      .select(['accounts.id', 'accounts.address'])
      .where('accounts.kind', '=', 'user')
      .where('chain_wallets.account_id', 'is', null)
      .execute()
    return rows.map((r) => ({ id: num(r.id), address: r.address }))
  }

  /** The newest block any wallet was read at (what the watcher has seen). */
  async lastSyncedBlock(): Promise<bigint | null> {
    const r = await this.db
      .selectFrom('chain_wallets')
      .select((eb) => eb.fn.max<bigint | null>('block').as('block'))
      .executeTakeFirst()
    return r?.block === null || r?.block === undefined ? null : big(r.block)
  }

  /** Accounts whose charges a batch failed to collect. */
  async debtors(): Promise<{ id: number; address: string; debt: bigint }[]> {
    const rows = await this.db
      .selectFrom('accounts')
      .select(['id', 'address', 'debt'])
      .where('debt', '>', 0n)
      .orderBy('id')
      .execute()
    return rows.map((r) => ({ id: num(r.id), address: r.address, debt: big(r.debt) }))
  }
}

/** Captured charges not yet settled on chain: unbatched ones, and those in batches still building, open or sent. */
async function owedIn(db: Kysely<Database> | Transaction<Database>, accountId: number): Promise<bigint> {
  // Two sums, each served by a partial index (holds_unbatched by account; holds_batched by batch).
  const unbatched = await db
    .selectFrom('holds')
    .select(sql<bigint>`coalesce(sum(cost), 0)`.as('owed'))
    .where('account_id', '=', accountId)
    .where('status', '=', sql.lit('captured'))
    .where('batch_id', 'is', null)
    .executeTakeFirstOrThrow()
  const unsettled = db.selectFrom('batches').select('id').where('status', 'in', ['building', 'open', 'sent'])
  const batched = await db
    .selectFrom('holds')
    .select(sql<bigint>`coalesce(sum(cost), 0)`.as('owed'))
    .where('batch_id', 'in', unsettled)
    .where('account_id', '=', accountId)
    .where('status', '=', sql.lit('captured'))
    .executeTakeFirstOrThrow()
  return big(unbatched.owed) + big(batched.owed)
}
