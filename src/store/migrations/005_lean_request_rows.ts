import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Fewer pages written per request: on SQLite holds and usage WITHOUT ROWID; one partial index for both sweeps of open
 * holds; captured-but-unbatched holds indexed by account (replacing (account_id, status, batch_id)); postings lose
 * their index on ref. Why: docs/architecture.md §15.22.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  for (const name of [
    'holds_open_expiry',
    'holds_open_owner',
    'holds_unbatched',
    'holds_account_unsettled',
    'postings_ref',
  ]) {
    await db.schema.dropIndex(name).ifExists().execute()
  }
  if (dialect === 'sqlite') await rebuildWithoutRowid(db)
  await db.schema
    .createIndex('holds_open')
    .on('holds')
    .columns(['owner', 'expires_at'])
    .where(sql.ref('status'), '=', sql.lit('open'))
    .execute()
  await db.schema
    .createIndex('holds_unbatched')
    .on('holds')
    .column('account_id')
    .where((eb) => eb.and([eb(sql.ref('status'), '=', sql.lit('captured')), eb(sql.ref('batch_id'), 'is', null)]))
    .execute()
}

const HOLDS = `(
  request_id text NOT NULL PRIMARY KEY, account_id integer NOT NULL REFERENCES accounts(id), key_id text NOT NULL,
  model text NOT NULL, amount integer NOT NULL, status text NOT NULL, owner text NOT NULL, created_at integer NOT NULL,
  expires_at integer NOT NULL, closed_at integer, cost integer, payee_id integer, fee integer, batch_id text
) WITHOUT ROWID`

const USAGE = `(
  request_id text NOT NULL PRIMARY KEY, account_id integer NOT NULL REFERENCES accounts(id), key_id text NOT NULL,
  model text NOT NULL, served_model text, provider text, stream integer NOT NULL, prompt_tokens integer NOT NULL,
  completion_tokens integer NOT NULL, upstream_prompt_tokens integer, upstream_completion_tokens integer,
  cost integer NOT NULL, outcome text NOT NULL, latency_ms integer NOT NULL, created_at integer NOT NULL
) WITHOUT ROWID`

async function rebuildWithoutRowid(db: Kysely<unknown>): Promise<void> {
  for (const [table, shape] of [
    ['holds', HOLDS],
    ['usage', USAGE],
  ] as const) {
    await sql.raw(`CREATE TABLE ${table}_lean ${shape}`).execute(db)
    await sql.raw(`INSERT INTO ${table}_lean SELECT ${columnsOf(shape)} FROM ${table}`).execute(db)
    await sql.raw(`DROP TABLE ${table}`).execute(db)
    await sql.raw(`ALTER TABLE ${table}_lean RENAME TO ${table}`).execute(db)
  }
  await db.schema
    .createIndex('holds_batched')
    .on('holds')
    .column('batch_id')
    .where(sql.ref('batch_id'), 'is not', null)
    .execute()
  await db.schema
    .createIndex('holds_payee')
    .on('holds')
    .column('payee_id')
    .where(sql.ref('payee_id'), 'is not', null)
    .execute()
  await db.schema.createIndex('usage_account_time').on('usage').columns(['account_id', 'created_at']).execute()
}

function columnsOf(shape: string): string {
  return [...shape.matchAll(/(?:\(|,)\s*([a-z_]+) (?:text|integer)/g)].map((m) => m[1]).join(', ')
}
