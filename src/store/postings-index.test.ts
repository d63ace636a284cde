import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CompiledQuery, sql } from 'kysely'
import type { Store } from './store.js'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'

/**
 * Postings are indexed by account only for the books no account row caches (migration 007), and a request's postings
 * are derived from its row (migration 010), whose indexes by payer, payee and fee account serve them: a payee's
 * figures must still be read through indexes, never by reading every posting or every request.
 */
describe.each(STORE_KINDS)('postings by account on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    store = f.store
  })
  afterAll(() => closeFixture(f))

  it("reads a payee's pending and settled sums through the partial index, not every posting", async () => {
    const { user, payee, fees } = f!
    await store.accounts.deposit({ id: user, amount: 1_000n, ref: 'dep_1', now: 1000 })
    await store.accounts.approve(user, 1_000n)
    expect(
      await store.ledger.hold({
        requestId: 'r1',
        accountId: user,
        keyId: 'k',
        model: 'm',
        amount: 100n,
        owner: 'i1',
        now: 1000,
        expiresAt: 9000,
      }),
    ).toEqual({ ok: true })
    expect(
      await store.ledger.capture({
        requestId: 'r1',
        cost: 40n,
        payeeId: payee,
        fee: 2n,
        feeAccountId: fees,
        now: 1001,
        usage: usageRecord('r1', user, 40n),
      }),
    ).toBe(true)
    expect(await store.settlement.payeeTotals(payee)).toEqual({ pending: 38n, settled: 0n })

    const q = store.settlement.payeeTotalsQuery(payee).compile()
    const plan =
      kind === 'sqlite'
        ? (
            await store.db.executeQuery<{ detail: string }>(
              CompiledQuery.raw(`EXPLAIN QUERY PLAN ${q.sql}`, [...q.parameters]),
            )
          ).rows
            .map((r) => r.detail)
            .join('\n')
        : await store.db.transaction().execute(async (trx) => {
            // A table this small is scanned whatever the indexes: forbid the scan, and see whether the index can serve.
            await sql`set local enable_seqscan = off`.execute(trx)
            const rows = (
              await trx.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`EXPLAIN ${q.sql}`, [...q.parameters]))
            ).rows
            return rows.map((r) => r['QUERY PLAN']).join('\n')
          })
    // Each part of the view by its own index: the written rows, and the posted requests by payee and by fee account
    // (the payer's parts hold no pending or settlement postings: Postgres leaves them out, SQLite tests that once).
    for (const index of ['postings_uncached', 'holds_payee', 'holds_fee']) expect(plan).toMatch(new RegExp(index))
    expect(plan).not.toMatch(/SCAN (posting_rows|holds)\b|Seq Scan on (posting_rows|holds)\b/)
  })

  it('still audits every cached balance against its postings, read in one pass without that index', async () => {
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
    const { user } = f!
    await store.db
      .updateTable('accounts')
      .set({ balance: sql`balance + 1` })
      .where('id', '=', user)
      .execute()
    try {
      const { inconsistent } = await store.ledger.audit()
      expect(inconsistent).toEqual([
        {
          address: '0x1111111111111111111111111111111111111111',
          balance: 961n,
          held: 0n,
          postedBalance: 960n,
          postedHeld: 0n,
        },
      ])
    } finally {
      await store.db
        .updateTable('accounts')
        .set({ balance: sql`balance - 1` })
        .where('id', '=', user)
        .execute()
    }
  })
})
