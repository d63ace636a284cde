import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import type { Lock, StoreDialect } from './dialect.js'
import type { StoreBackend } from './backend.js'
import { AccountRepo } from './accounts.js'
import { ProviderRepo } from './providers.js'
import { KeyRepo } from './keys.js'
import { LedgerRepo } from './ledger/repo.js'
import { UsageRepo } from './usage.js'
import { SettlementRepo } from './settlement.js'
import { InstanceRepo } from './instances.js'
import type { HotLedger } from './ledger/types.js'
import { PortalRepo } from './portal.js'
import { ChainRepo } from './chain.js'
import { ReceiptsRepo } from './receipts.js'
import { pendingMigrations } from './migrate.js'
import { IdempotencyRepo } from './idempotency.js'
import { InFlightRepo } from './instances.js'
import { RefusalRepo } from './refusals.js'
import type { KeyRatesRepo } from './key-rates.js'
import { KeptResponseRepo } from './kept-responses.js'
import { AuditRepo } from './audits.js'
import { HeldEarningsRepo } from './held-earnings.js'
import { X402Repo } from './x402.js'

/** The single source of truth for accounts, keys, balances, holds, usage and settlement. All SQL lives below here. */
export class Store {
  readonly accounts: AccountRepo
  readonly keys: KeyRepo
  readonly providers: ProviderRepo
  readonly ledger: LedgerRepo
  readonly usage: UsageRepo
  readonly settlement: SettlementRepo
  readonly instances: InstanceRepo
  readonly portal: PortalRepo
  readonly chain: ChainRepo
  readonly receipts: ReceiptsRepo
  readonly idempotency: IdempotencyRepo
  readonly inFlight: InFlightRepo
  readonly refusals: RefusalRepo
  readonly keyRates: KeyRatesRepo
  readonly keptResponses: KeptResponseRepo
  readonly audits: AuditRepo
  readonly heldEarnings: HeldEarningsRepo
  readonly x402: X402Repo

  readonly db: Kysely<Database>
  /** The dialect's ways of asking, as the repositories read them. */
  readonly dialect: StoreDialect
  private readonly hot: HotLedger

  constructor(private readonly backend: StoreBackend) {
    const { db } = backend
    const dialect: StoreDialect = backend
    this.db = db
    this.dialect = dialect
    this.hot = backend.ledger
    const hot = this.hot
    this.accounts = new AccountRepo(db)
    this.keys = new KeyRepo(db, dialect)
    this.providers = new ProviderRepo(db)
    this.ledger = new LedgerRepo(db, hot, dialect)
    this.usage = new UsageRepo(db, dialect)
    this.settlement = new SettlementRepo(db, dialect)
    this.instances = new InstanceRepo(db)
    this.portal = new PortalRepo(db)
    this.chain = new ChainRepo(db, dialect)
    this.receipts = new ReceiptsRepo(db)
    this.idempotency = new IdempotencyRepo(db)
    this.inFlight = new InFlightRepo(db)
    this.refusals = new RefusalRepo(db)
    this.keyRates = backend.keyRates
    this.keptResponses = new KeptResponseRepo(db)
    this.audits = new AuditRepo(db)
    this.heldEarnings = new HeldEarningsRepo(db)
    this.x402 = new X402Repo(db)
  }

  /** What keeps this store from serving: unreachable, or migrations it has not run. Empty when it is ready. */
  async problems(): Promise<string[]> {
    try {
      const pending = await pendingMigrations(this.db as unknown as Kysely<unknown>)
      return pending.length ? [`the store has not run migrations ${pending.join(', ')}: run svc migrate`] : []
    } catch (err) {
      return [`the store does not answer: ${(err as Error).message}`]
    }
  }

  tryLock(name: string): Promise<Lock | null> {
    return this.backend.tryLock(name)
  }

  async close(): Promise<void> {
    // Queued holds, captures and releases commit first: closing under them would lose charges already served.
    await this.hot.close()
    await this.ledger.forgetRetired().catch(() => {})
    await this.db.destroy()
    await this.backend.close()
  }
}
