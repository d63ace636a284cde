import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { createLedgerGroupFunctions } from './018_ledger_groups.js'

/**
 * Postgres: the group function takes each account's operations as a run of its inputs (the caller sorts them by
 * account) instead of grouping them with queries of its own, and locks accounts first only when the group has several.
 * Same signature: a gateway of the version before, whose inputs are not sorted, gets the same answers.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') await createLedgerGroupFunctions(db)
}
