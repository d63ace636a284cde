import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * On SQLite, holds and usage go back to rowid tables with their request id as a unique key (005 made them WITHOUT
 * ROWID); Postgres tables are heaps already and do not change. Why: docs/architecture.md §15.22.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') return
  // One transaction: a crash between the copy and the rename would leave a store that cannot start.
  await db.transaction().execute(async (trx) => {
    for (const [table, columns] of [
      ['holds', HOLDS],
      ['usage', USAGE],
    ] as const) {
      await sql.raw(`CREATE TABLE ${table}_rows (${columns})`).execute(trx)
      await sql
        .raw(`INSERT INTO ${table}_rows (${names(columns)}) SELECT ${names(columns)} FROM ${table} ORDER BY request_id`)
        .execute(trx)
      await sql.raw(`DROP TABLE ${table}`).execute(trx)
      await sql.raw(`ALTER TABLE ${table}_rows RENAME TO ${table}`).execute(trx)
    }
    await trx.schema
      .createIndex('holds_open')
      .on('holds')
      .columns(['owner', 'expires_at'])
      .where(sql.ref('status'), '=', sql.lit('open'))
      .execute()
    await trx.schema
      .createIndex('holds_unbatched')
      .on('holds')
      .column('account_id')
      .where((eb) => eb.and([eb(sql.ref('status'), '=', sql.lit('captured')), eb(sql.ref('batch_id'), 'is', null)]))
      .execute()
    await trx.schema
      .createIndex('holds_batched')
      .on('holds')
      .column('batch_id')
      .where(sql.ref('batch_id'), 'is not', null)
      .execute()
    await trx.schema
      .createIndex('holds_payee')
      .on('holds')
      .column('payee_id')
      .where(sql.ref('payee_id'), 'is not', null)
      .execute()
    await trx.schema.createIndex('usage_account_time').on('usage').columns(['account_id', 'created_at']).execute()
  })
}

const HOLDS = `
  request_id text NOT NULL PRIMARY KEY, account_id integer NOT NULL REFERENCES accounts(id), key_id text NOT NULL,
  model text NOT NULL, amount integer NOT NULL, status text NOT NULL, owner text NOT NULL, created_at integer NOT NULL,
  expires_at integer NOT NULL, closed_at integer, cost integer, payee_id integer, fee integer, batch_id text`

const USAGE = `
  request_id text NOT NULL PRIMARY KEY, account_id integer NOT NULL REFERENCES accounts(id), key_id text NOT NULL,
  model text NOT NULL, served_model text, provider text, stream integer NOT NULL, prompt_tokens integer NOT NULL,
  completion_tokens integer NOT NULL, upstream_prompt_tokens integer, upstream_completion_tokens integer,
  cost integer NOT NULL, outcome text NOT NULL, latency_ms integer NOT NULL, created_at integer NOT NULL`

function names(columns: string): string {
  return [...columns.matchAll(/(?:^|,)\s*([a-z_]+) (?:text|integer)/g)].map((m) => m[1]).join(', ')
}
