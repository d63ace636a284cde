import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { RECORD_COLUMNS } from '../ledger/types.js'

/**
 * Postgres: `svc_ledger_group`, the hot ledger's group commit (store/postgres/ledger-groups.ts). One call closes and
 * holds many requests of one instance in one transaction, each with the same conditional writes as its statement of
 * one (postgres/hot-ledger.ts), every account of the group locked first, in ascending order. Inputs are parallel
 * arrays; the rows are JSON objects of RECORD_COLUMNS. Returns, per close, 1 closed, 0 released first by a sweep
 * (its row written as swept), -1 closed already (nothing written); per hold, whether it was admitted.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return
  const cols = RECORD_COLUMNS
  await sql
    .raw(
      `
CREATE OR REPLACE FUNCTION svc_ledger_group(
  p_owner text,
  c_accounts bigint[], c_amounts bigint[], c_costs bigint[], c_rows jsonb, c_swept jsonb,
  h_accounts bigint[], h_amounts bigint[],
  OUT r_closed int[], OUT r_held boolean[]
) LANGUAGE plpgsql AS $fn$
DECLARE
  i int;
  acct bigint;
  total bigint;
  k int;
BEGIN
  r_closed := array_fill(0, ARRAY[coalesce(array_length(c_accounts, 1), 0)]);
  r_held := array_fill(false, ARRAY[coalesce(array_length(h_accounts, 1), 0)]);
  -- Every account of the group, locked in ascending order before any write, as a statement of one locks its one.
  PERFORM 1 FROM accounts WHERE id = ANY (c_accounts || h_accounts) ORDER BY id FOR UPDATE;
  FOR i IN 1 .. coalesce(array_length(c_accounts, 1), 0) LOOP
    UPDATE owner_holds SET held = held - c_amounts[i], open = open - 1
      WHERE owner = p_owner AND account_id = c_accounts[i] AND held >= c_amounts[i] AND open > 0;
    IF FOUND THEN
      INSERT INTO holds (${cols}) SELECT ${cols} FROM jsonb_populate_record(NULL::holds, c_rows -> (i - 1))
        ON CONFLICT (request_id) DO NOTHING;
      IF FOUND THEN
        UPDATE accounts SET balance = balance - c_costs[i], held = accounts.held - c_amounts[i],
          cap = CASE WHEN cap > c_costs[i] THEN cap - c_costs[i] ELSE 0 END
          WHERE id = c_accounts[i];
        r_closed[i] := 1;
      ELSE
        UPDATE owner_holds SET held = held + c_amounts[i], open = open + 1
          WHERE owner = p_owner AND account_id = c_accounts[i];
        r_closed[i] := -1;
      END IF;
    ELSE
      INSERT INTO holds (${cols}) SELECT ${cols} FROM jsonb_populate_record(NULL::holds, c_swept -> (i - 1))
        ON CONFLICT (request_id) DO NOTHING;
    END IF;
  END LOOP;
  FOR i IN 1 .. coalesce(array_length(h_accounts, 1), 0) LOOP
    UPDATE accounts SET held = held + h_amounts[i]
      WHERE id = h_accounts[i] AND status = 'active' AND debt = 0
        AND balance - held >= h_amounts[i] AND cap - held >= h_amounts[i];
    r_held[i] := FOUND;
  END LOOP;
  FOR acct, total, k IN
    SELECT t.a, sum(t.m), count(*) FROM unnest(h_accounts, h_amounts, r_held) AS t(a, m, ok) WHERE t.ok
    GROUP BY t.a ORDER BY t.a
  LOOP
    INSERT INTO owner_holds (owner, account_id, held, open) VALUES (p_owner, acct, total, k)
      ON CONFLICT (owner, account_id) DO UPDATE
      SET held = owner_holds.held + excluded.held, open = owner_holds.open + excluded.open;
  END LOOP;
END
$fn$`,
    )
    .execute(db)
}
