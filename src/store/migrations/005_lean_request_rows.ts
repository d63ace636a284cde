import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Every request writes a hold, postings and a usage row twice over; each B-tree page they touch is a page written
 * to the WAL at commit. This migration trims the pages per request:
 * - on SQLite, holds and usage become WITHOUT ROWID tables: the text primary key is the table, not a second B-tree;
 * - one partial index serves both sweeps of open holds (by owner, and by expiry: open holds are few);
 * - captured-but-unbatched holds are indexed by account, which serves the settler and the chain's "owed" sum, and
 *   replaces a full index on (account_id, status, batch_id) that every hold and capture had to maintain;
 * - postings lose their index on ref (only audits read by ref, and they scan anyway).
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
