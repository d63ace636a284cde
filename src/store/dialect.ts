import type { Kysely, Transaction, TransactionBuilder } from 'kysely'
import type { Database } from './schema.js'
import type { UsageFilter, UsageSummary } from './usage-types.js'
import type { PayeeSums } from './batch-types.js'

/**
 * The database a store is kept in, by name: what `migrate` and the migrations (which keep their own checks) are told.
 */
export type Dialect = 'sqlite' | 'postgres'

/**
 * What the shared repositories do differently on each database, as Kysely's `DialectAdapter` is to its query builder:
 * one per dialect folder, handed by `openStore` to the repositories, which call it where they would ask which database
 * they are on. Each method runs what the repositories ran inline before, statement for statement.
 */
export interface StoreDialect {
  readonly name: Dialect
  /**
   * `q` with the rows it reads locked until its transaction ends: `FOR UPDATE` on Postgres. On SQLite a writing
   * transaction holds the database's write lock from its start (begin immediate): `q` as it is.
   */
  forUpdate<Q extends { forUpdate(): Q }>(q: Q): Q
  /**
   * Locks an account's row until the transaction ends, before reads that must not change under it: Postgres selects it
   * `FOR UPDATE`; SQLite runs nothing (the transaction holds the write lock).
   */
  lockAccount(trx: Transaction<Database>, accountId: number): Promise<void>
  /**
   * Bounds how long each later statement of the transaction may take (a wait for a row lock, mostly): Postgres's
   * `SET LOCAL statement_timeout`. SQLite runs nothing: a statement there waits for a locked database for at most
   * BUSY_WAIT_MS (sqlite/engine/patient-dialect.ts).
   */
  boundStatements(trx: Transaction<Database>, ms: number): Promise<void>
  /**
   * A read-only transaction that sees one state of the store: repeatable read on Postgres; on SQLite a read-only
   * transaction (begun deferred) reads one WAL snapshot, and this process's hot ledger waits for it.
   */
  readOnlySnapshot(db: Kysely<Database>): TransactionBuilder<Database>
  /**
   * An account's usage summary (`UsageRepo.summary`): on Postgres the repository's two whole queries (`whole`), off
   * the event loop; on SQLite read in slices, where one statement over a long history would hold the event loop
   * (better-sqlite3 is synchronous).
   */
  usageSummary(db: Kysely<Database>, q: SummaryQuery): Promise<UsageSummary>
  /**
   * Payees' sums: on Postgres read whole each time (`whole`); on SQLite kept per process and folded forward from the
   * rows since the last read, where reading them whole would hold the event loop. `sliceRows`: tests.
   */
  payeeSums(
    db: Kysely<Database>,
    q: { whole: (accountId: number) => Promise<PayeeSums>; sliceRows?: number },
  ): PayeeSumsReader
}

/** An account's usage summary as asked: its filter, the first day of its days, and the repository's whole reads. */
export interface SummaryQuery {
  accountId: number
  filter: UsageFilter
  since: number
  whole: () => Promise<UsageSummary>
}

/** Payees' sums as `StoreDialect.payeeSums` keeps them. */
export interface PayeeSumsReader {
  /** The account's sums over every row now (or past it, when another read went further). */
  of(accountId: number): Promise<PayeeSums>
}

export interface Lock {
  release(): Promise<void>
}
