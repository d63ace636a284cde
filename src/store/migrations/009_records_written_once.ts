import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { columnsOf } from './columns.js'

/** The usage columns a request's row in `holds` carries since this migration (the `usage` view reads them). */
export const USAGE_ON_HOLDS = [
  'served_model',
  'provider',
  'stream',
  'prompt_tokens',
  'completion_tokens',
  'upstream_prompt_tokens',
  'upstream_completion_tokens',
  'outcome',
  'latency_ms',
] as const

/**
 * A request's record written once, when it closes (docs/ledger-written-once.md): open holds are counted in
 * `owner_holds`, the close inserts one `holds` row, `usage` becomes a view over them, and `dead` marks the counters of
 * an instance a sweep took for dead. Details: docs/architecture.md §15.22.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { big } = columnsOf(dialect)
  const steps = async (db: Kysely<unknown>) => {
    await sql
      .raw(
        `CREATE TABLE owner_holds (
      owner text NOT NULL, account_id ${big} NOT NULL REFERENCES accounts(id), held ${big} NOT NULL, open integer NOT NULL,
      dead integer NOT NULL DEFAULT 0, PRIMARY KEY (owner, account_id), CHECK (dead = 0 OR (held = 0 AND open = 0)), CHECK (held >= 0 AND open >= 0)
    )${dialect === 'sqlite' ? ' WITHOUT ROWID' : ''}`,
      )
      .execute(db)
    const types: Record<(typeof USAGE_ON_HOLDS)[number], string> = {
      served_model: 'text',
      provider: 'text',
      stream: 'integer',
      prompt_tokens: 'integer',
      completion_tokens: 'integer',
      upstream_prompt_tokens: 'integer',
      upstream_completion_tokens: 'integer',
      outcome: 'text',
      latency_ms: 'integer',
    }
    for (const column of USAGE_ON_HOLDS)
      await sql.raw(`ALTER TABLE holds ADD COLUMN ${column} ${types[column]}`).execute(db)
    const columns = USAGE_ON_HOLDS.join(', ')
    await sql
      .raw(
        `UPDATE holds SET (${columns}) = (SELECT ${columns} FROM usage WHERE usage.request_id = holds.request_id)
      WHERE EXISTS (SELECT 1 FROM usage WHERE usage.request_id = holds.request_id)`,
      )
      .execute(db)
    // Usage without a hold: requests refused (or failed) before admission.
    await sql
      .raw(
        `INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at, cost, ${columns})
      SELECT request_id, account_id, key_id, model, 0, 'refused', '', created_at, created_at, cost, ${columns} FROM usage
      WHERE NOT EXISTS (SELECT 1 FROM holds WHERE holds.request_id = usage.request_id)`,
      )
      .execute(db)
    await sql.raw('DROP TABLE usage').execute(db)
    await sql
      .raw(
        `CREATE VIEW usage AS SELECT request_id, account_id, key_id, model, served_model, provider, stream, prompt_tokens,
      completion_tokens, upstream_prompt_tokens, upstream_completion_tokens, coalesce(cost, 0) AS cost, outcome, latency_ms, created_at
      FROM holds WHERE outcome IS NOT NULL`,
      )
      .execute(db)
    await sql.raw('CREATE INDEX holds_account_time ON holds (account_id, created_at)').execute(db)
  }
  // Postgres runs each migration in a transaction of Kysely's; SQLite's DDL is transactional too, but Kysely does
  // not wrap it: a crash between the copy and the drop would leave a store that cannot start.
  if (dialect === 'sqlite') await db.transaction().execute(steps)
  else await steps(db)
}
