import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { RECORD_COLUMNS, SWEPT_COLUMNS } from '../ledger/types.js'

/**
 * Postgres: `svc_ledger_group`, the hot ledger's group commit (store/postgres/ledger-ops.ts). One call closes and
 * holds many requests of one instance in one transaction, with the conditional writes of their statements of one
 * (postgres/hot-ledger.ts), every account of the group locked first, in ascending order. As on SQLite (§15.15), the
 * operations of one account move its rows once when they can all at once (the closes' counter holds them all; the
 * holds' sum is spendable), else one by one. Inputs are parallel arrays; the rows are JSON objects of RECORD_COLUMNS.
 * Returns, per close, 1 closed, 0 released first by a sweep (its row written as swept), -1 closed already (nothing
 * written); per hold, whether it was admitted.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') await createLedgerGroupFunctions(db)
}

/**
 * Creates (or replaces) the group's functions with the request row's columns of this version (RECORD_COLUMNS): a
 * migration that adds columns to the row calls it again. A close whose hold a sweep released first writes its row as
 * swept: the close's row with SWEPT_COLUMNS.
 */
export async function createLedgerGroupFunctions(db: Kysely<unknown>): Promise<void> {
  const cols = RECORD_COLUMNS
  const swept = JSON.stringify(SWEPT_COLUMNS)
  await sql
    .raw(
      `
CREATE OR REPLACE FUNCTION svc_close_one(p_owner text, p_acct bigint, p_amount bigint, p_cost bigint, p_rec jsonb)
RETURNS int LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE owner_holds SET held = held - p_amount, open = open - 1
    WHERE owner = p_owner AND account_id = p_acct AND held >= p_amount AND open > 0;
  IF NOT FOUND THEN
    INSERT INTO holds (${cols}) SELECT ${cols} FROM jsonb_populate_record(NULL::holds, p_rec || '${swept}'::jsonb)
      ON CONFLICT (request_id) DO NOTHING;
    RETURN 0;
  END IF;
  INSERT INTO holds (${cols}) SELECT ${cols} FROM jsonb_populate_record(NULL::holds, p_rec)
    ON CONFLICT (request_id) DO NOTHING;
  IF NOT FOUND THEN
    UPDATE owner_holds SET held = held + p_amount, open = open + 1 WHERE owner = p_owner AND account_id = p_acct;
    RETURN -1;
  END IF;
  UPDATE accounts SET balance = balance - p_cost, held = accounts.held - p_amount,
    cap = CASE WHEN cap > p_cost THEN cap - p_cost ELSE 0 END
    WHERE id = p_acct;
  RETURN 1;
END
$fn$;

CREATE OR REPLACE FUNCTION svc_ledger_group(
  p_owner text,
  c_accounts bigint[], c_amounts bigint[], c_costs bigint[], c_rows json,
  h_accounts bigint[], h_amounts bigint[],
  OUT r_closed int[], OUT r_held boolean[]
) LANGUAGE plpgsql AS $fn$
DECLARE
  v_closes int := coalesce(array_length(c_accounts, 1), 0);
  v_acct bigint;
  v_idx int[];
  i int;
  v_amount bigint;
  v_cost bigint;
  v_k int;
  v_written text[];
BEGIN
  r_closed := array_fill(0, ARRAY[v_closes]);
  r_held := array_fill(false, ARRAY[coalesce(array_length(h_accounts, 1), 0)]);
  -- Every account of the group, locked in ascending order before any write, as a statement of one locks its one.
  PERFORM 1 FROM accounts WHERE id = ANY (c_accounts || h_accounts) ORDER BY id FOR NO KEY UPDATE;
  FOR v_acct, v_idx, v_amount, v_cost, v_k IN
    SELECT t.a, array_agg(t.n ORDER BY t.n), sum(t.m), sum(t.c), count(*)
    FROM unnest(c_accounts, c_amounts, c_costs) WITH ORDINALITY AS t(a, m, c, n)
    GROUP BY t.a ORDER BY t.a
  LOOP
    UPDATE owner_holds SET held = held - v_amount, open = open - v_k
      WHERE owner = p_owner AND account_id = v_acct AND held >= v_amount AND open >= v_k;
    IF NOT FOUND THEN
      FOREACH i IN ARRAY v_idx LOOP
        r_closed[i] := svc_close_one(p_owner, v_acct, c_amounts[i], c_costs[i], (c_rows -> (i - 1))::jsonb);
      END LOOP;
      CONTINUE;
    END IF;
    -- Every hold of the set was held: their rows (all of the group's when the set is the group's closes).
    WITH ins AS (
      INSERT INTO holds (${cols})
      SELECT ${cols} FROM json_populate_recordset(NULL::holds, CASE WHEN v_k = v_closes THEN c_rows
        ELSE (SELECT json_agg(c_rows -> (j - 1) ORDER BY j) FROM unnest(v_idx) AS j) END)
      ON CONFLICT (request_id) DO NOTHING
      RETURNING request_id
    )
    SELECT array_agg(request_id) INTO v_written FROM ins;
    FOREACH i IN ARRAY v_idx LOOP r_closed[i] := 1; END LOOP;
    IF coalesce(array_length(v_written, 1), 0) < v_k THEN
      -- Some were closed already (their rows were there): they move nothing, and their counts go back.
      v_amount := 0;
      v_cost := 0;
      v_k := 0;
      FOREACH i IN ARRAY v_idx LOOP
        IF (c_rows -> (i - 1) ->> 'request_id') = ANY (v_written) THEN
          v_amount := v_amount + c_amounts[i];
          v_cost := v_cost + c_costs[i];
        ELSE
          r_closed[i] := -1;
          UPDATE owner_holds SET held = held + c_amounts[i], open = open + 1
            WHERE owner = p_owner AND account_id = v_acct;
        END IF;
      END LOOP;
    END IF;
    -- cap - c1 - c2 floored at 0 is cap - c1 floored at 0, then - c2 floored at 0: one write for the set.
    UPDATE accounts SET balance = balance - v_cost, held = accounts.held - v_amount,
      cap = CASE WHEN cap > v_cost THEN cap - v_cost ELSE 0 END
      WHERE id = v_acct;
  END LOOP;
  FOR v_acct, v_idx, v_amount IN
    SELECT t.a, array_agg(t.n ORDER BY t.n), sum(t.m) FROM unnest(h_accounts, h_amounts) WITH ORDINALITY AS t(a, m, n)
    GROUP BY t.a ORDER BY t.a
  LOOP
    UPDATE accounts SET held = held + v_amount
      WHERE id = v_acct AND status = 'active' AND debt = 0 AND balance - held >= v_amount AND cap - held >= v_amount;
    IF FOUND THEN
      FOREACH i IN ARRAY v_idx LOOP r_held[i] := true; END LOOP;
      v_k := array_length(v_idx, 1);
    ELSE
      v_amount := 0;
      v_k := 0;
      FOREACH i IN ARRAY v_idx LOOP
        UPDATE accounts SET held = held + h_amounts[i]
          WHERE id = v_acct AND status = 'active' AND debt = 0
            AND balance - held >= h_amounts[i] AND cap - held >= h_amounts[i];
        r_held[i] := FOUND;
        IF FOUND THEN
          v_amount := v_amount + h_amounts[i];
          v_k := v_k + 1;
        END IF;
      END LOOP;
    END IF;
    IF v_k > 0 THEN
      INSERT INTO owner_holds (owner, account_id, held, open) VALUES (p_owner, v_acct, v_amount, v_k)
        ON CONFLICT (owner, account_id) DO UPDATE
        SET held = owner_holds.held + excluded.held, open = owner_holds.open + excluded.open;
    END IF;
  END LOOP;
END
$fn$`,
    )
    .execute(db)
}
