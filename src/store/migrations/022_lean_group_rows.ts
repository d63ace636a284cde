import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { createLedgerGroupFunctions } from './018_ledger_groups.js'

/**
 * Postgres: the group's closes are sent their rows once; a close a sweep overtook derives its swept row from its own
 * (SWEPT_COLUMNS) instead of being sent a second row. The functions of the earlier signature go: a gateway of an older
 * version still running finds no group function, and its groups' operations run through their statements of one.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return
  await sql`DROP FUNCTION IF EXISTS svc_ledger_group(text, bigint[], bigint[], bigint[], jsonb, jsonb, bigint[], bigint[])`.execute(
    db,
  )
  await sql`DROP FUNCTION IF EXISTS svc_close_one(text, bigint, bigint, bigint, jsonb, jsonb)`.execute(db)
  await createLedgerGroupFunctions(db)
}
