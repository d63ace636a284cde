import type pg from 'pg'
import { KEY_CLOSE, KEY_HOLD, KEY_UNHELD, keyValues } from '../ledger/key-spend.js'
import type { HoldRequest } from '../ledger/types.js'

/** Each named placeholder of the key statements, as a typed positional parameter from `$first`. */
const TYPES = { owner: 'text', key: 'text', amount: 'bigint', cost: 'bigint', period: 'bigint', reset: 'text' } as const
type Name = keyof typeof TYPES

function positional(sql: string, names: readonly Name[], first: number): string {
  return sql.replace(
    /:(owner|key|amount|cost|period|reset)\b/g,
    (_, n: Name) => `$${first + names.indexOf(n)}::${TYPES[n]}`,
  )
}

const HOLD_NAMES = ['owner', 'key', 'amount', 'period', 'reset'] as const

/**
 * A hold of a key with a spend limit, in ONE statement: the account's conditional write, then the key's (which runs
 * only when the account admitted it), then both counters of the instance. `account` says whether the account
 * admitted it and `ok` whether the key did too: when only the account did, its transaction must roll back. $1 owner,
 * $2 key, $3 amount, $4 period, $5 reset, $6 account.
 */
export const HOLD_KEY = `
WITH acct AS (
  UPDATE accounts SET held = held + $3::bigint
  WHERE id = $6::bigint AND status = 'active' AND debt = 0 AND balance - held >= $3::bigint AND cap - held >= $3::bigint
  RETURNING id
), k AS (
  ${positional(KEY_HOLD, HOLD_NAMES, 1)} AND EXISTS (SELECT 1 FROM acct)
  RETURNING id
), o AS (
  INSERT INTO owner_holds (owner, account_id, held, open) SELECT $1::text, $6::bigint, $3::bigint, 1 FROM k
  ON CONFLICT (owner, account_id) DO UPDATE SET held = owner_holds.held + excluded.held, open = owner_holds.open + 1
), kh AS (
  INSERT INTO key_holds (owner, key_id, held) SELECT $1::text, id, $3::bigint FROM k
  ON CONFLICT (owner, key_id) DO UPDATE SET held = key_holds.held + excluded.held
)
SELECT (SELECT count(*) FROM acct)::int AS account, (SELECT count(*) FROM k)::int AS ok`

export function holdKeyValues(h: HoldRequest): unknown[] {
  const v = keyValues(h, h.now)
  return [...HOLD_NAMES.map((n) => v[n]), h.accountId]
}

const CLOSE_NAMES = ['owner', 'key', 'amount', 'cost', 'period', 'reset'] as const

/**
 * The CTEs that close a key's share of a hold, after the close's own (`o`: the instance's counter held it), their
 * parameters from `$first` (`closeKeyValues`).
 */
export function closeKeyCtes(first: number): string {
  return `, k AS (
  ${positional(KEY_CLOSE, CLOSE_NAMES, first)} AND EXISTS (SELECT 1 FROM o)
), kh AS (
  ${positional(KEY_UNHELD, CLOSE_NAMES, first)} AND EXISTS (SELECT 1 FROM o)
)`
}

export function closeKeyValues(h: HoldRequest, now: number, cost: bigint): unknown[] {
  const v = keyValues(h, now, cost)
  return CLOSE_NAMES.map((n) => v[n])
}

/**
 * Runs a hold of a key with a spend limit in its own transaction, committed only when both the account and the key
 * admitted it; whether they did.
 */
export async function holdCountingKey(
  pool: pg.Pool,
  h: HoldRequest,
  param: (v: unknown) => unknown,
): Promise<{ account: boolean; ok: boolean }> {
  const client = await pool.connect()
  let broken: Error | undefined
  try {
    await client.query('BEGIN')
    const r = await client.query<{ account: number; ok: number }>({
      name: 'svc_hold_key',
      text: HOLD_KEY,
      values: holdKeyValues(h).map(param),
    })
    const account = r.rows[0]!.account > 0
    const ok = r.rows[0]!.ok > 0
    await client.query(ok ? 'COMMIT' : 'ROLLBACK')
    return { account, ok }
  } catch (err) {
    broken = err as Error
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release(broken)
  }
}
