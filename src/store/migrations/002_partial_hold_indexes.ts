import { sql, type Kysely } from 'kysely'

/**
 * Holds are written twice on every request; full indexes on status, owner and batch made each write touch three
 * more B-trees. Partial indexes cover only the rows their queries look for: open holds (sweeps, leases) and
 * captured holds not yet batched (the settler).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  for (const name of ['holds_open', 'holds_owner', 'holds_batch']) await db.schema.dropIndex(name).ifExists().execute()
  await db.schema
    .createIndex('holds_open_expiry')
    .on('holds')
    .column('expires_at')
    .where(sql.ref('status'), '=', sql.lit('open'))
    .execute()
  await db.schema
    .createIndex('holds_open_owner')
    .on('holds')
    .column('owner')
    .where(sql.ref('status'), '=', sql.lit('open'))
    .execute()
  await db.schema
    .createIndex('holds_unbatched')
    .on('holds')
    .column('request_id')
    .where((eb) => eb.and([eb(sql.ref('status'), '=', sql.lit('captured')), eb(sql.ref('batch_id'), 'is', null)]))
    .execute()
  await db.schema
    .createIndex('holds_batched')
    .on('holds')
    .column('batch_id')
    .where(sql.ref('batch_id'), 'is not', null)
    .execute()
}
