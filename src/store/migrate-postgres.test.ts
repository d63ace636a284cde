import { describe, expect, it } from 'vitest'
import { sql, type Kysely } from 'kysely'
import { openStore } from './open.js'
import { openPostgres } from './postgres/open.js'
import { migrate } from './migrate.js'
import { AccountRepo } from './accounts.js'
import type { Store } from './store.js'
import pg from 'pg'
import { DATABASE_URL, dropSchema, freshPostgresUrl, postgresReachable } from '../../test/helpers/stores.js'
import { usageRecord } from '../../test/helpers/store-fixture.js'

describe('migrations on postgres', () => {
  it('migrate a fresh schema while another store of the same database is open', async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    const urls = [freshPostgresUrl(), freshPostgresUrl()]
    const first = await openStore(urls[0]!)
    try {
      // Kysely found the first schema's migration tables and skipped creating the second's before the fix.
      const second = await openStore(urls[1]!)
      expect(await second.accounts.byAddress('svc:fees')).toBeDefined()
      await second.close()
    } finally {
      await first.close()
      for (const url of urls) await dropSchema(url)
    }
  })
})

describe('migrations on postgres, beside schemas that come and go', () => {
  it('migrate whatever other schemas of the database are created and dropped meanwhile', async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    // Other stores, or other test runs cleaning up: Kysely's own look for its tables read every schema's columns and
    // failed ("schema … does not exist") when one was dropped during it.
    const admin = new pg.Client({ connectionString: DATABASE_URL })
    await admin.connect()
    let churning = true
    let failed: unknown
    // Its own failure, if any, is kept to be thrown at the end rather than left unhandled meanwhile.
    const churn = (async () => {
      for (let i = 0; churning; i++) {
        const name = `churn_${process.pid}_${i}`
        await admin.query(`create schema ${name}`)
        await admin.query(`create table ${name}.t (a int)`)
        await admin.query(`drop schema ${name} cascade`)
      }
    })().then(
      () => undefined,
      (err: unknown) => err,
    )
    try {
      for (let n = 0; n < 10; n++) {
        const url = freshPostgresUrl()
        try {
          await (await openStore(url)).close()
        } finally {
          await dropSchema(url)
        }
      }
    } finally {
      churning = false
      failed = await churn
      await admin.end()
    }
    if (failed) throw failed
  })
})

describe('migration 010 on a Postgres store written before it', () => {
  it('keeps every posting written before it, with its id, and derives the postings of the requests after it', async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    const url = freshPostgresUrl()
    const h = await openPostgres(url)
    const ids: Record<string, number> = {}
    try {
      await migrate(h.db as unknown as Kysely<unknown>, 'postgres', '009_records_written_once')
      const accounts = new AccountRepo(h.db)
      for (const [name, address, kind] of [
        ['world', 'svc:world', 'system'],
        ['fees', 'svc:fees', 'system'],
        ['vendor', 'svc:vendor', 'system'],
        ['user', '0x1111111111111111111111111111111111111111', 'user'],
        ['payee', '0x2222222222222222222222222222222222222222', 'provider'],
      ] as const) {
        ids[name] = (await accounts.ensure(address, kind, 1000)).account.id
      }
      // What the ledger of 009 wrote: a deposit, and a captured request's row with its seven postings beside it.
      const post = ({
        ref,
        account,
        book,
        kind,
        amount,
        at,
      }: {
        ref: string
        account: number
        book: string
        kind: string
        amount: number
        at: number
      }) =>
        sql`INSERT INTO postings (ref, account_id, book, kind, amount, created_at) VALUES (${ref}, ${account}, ${book}, ${kind}, ${amount}, ${at})`.execute(
          h.db,
        )
      await post({ ref: 'dep_1', account: ids.user!, book: 'available', kind: 'deposit', amount: 1000, at: 1000 })
      await post({ ref: 'dep_1', account: ids.world!, book: 'available', kind: 'deposit', amount: -1000, at: 1000 })
      for (const [account, book, kind, amount, at] of [
        [ids.user!, 'held', 'hold', 100, 1000],
        [ids.user!, 'available', 'hold', -100, 1000],
        [ids.user!, 'held', 'release', -60, 1001],
        [ids.user!, 'available', 'release', 60, 1001],
        [ids.user!, 'held', 'capture', -40, 1001],
        [ids.payee!, 'pending', 'payout', 38, 1001],
        [ids.fees!, 'pending', 'fee', 2, 1001],
      ] as const)
        await post({ ref: 'r1', account, book, kind, amount, at })
      await sql`UPDATE accounts SET balance = 960, cap = 960 WHERE id = ${ids.user}`.execute(h.db)
      await sql`INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at, closed_at, cost, payee_id, fee,
        served_model, provider, stream, prompt_tokens, completion_tokens, outcome, latency_ms)
        VALUES ('r1', ${ids.user}, 'key_1', 'svc/atlas@1', 100, 'captured', 'i1', 1000, 61000, 1001, 40, ${ids.payee}, 2, 'svc/atlas@1', '0xabc', 0, 10, 5, 'completed', 1)`.execute(
        h.db,
      )
    } finally {
      await h.db.destroy()
    }
    const written = async (store: Store) =>
      (
        await sql<{
          id: string
        }>`SELECT id, ref, account_id, book, kind, amount, created_at FROM postings WHERE id IS NOT NULL ORDER BY id`.execute(
          store.db,
        )
      ).rows
    const store = await openStore(url)
    try {
      const before = await written(store)
      expect(before).toHaveLength(9)
      expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
      expect(await store.settlement.payeeTotals(ids.payee!)).toEqual({ pending: 38n, settled: 0n })
      expect(
        await store.ledger.hold({
          requestId: 'r2',
          accountId: ids.user!,
          keyId: 'key_1',
          model: 'svc/atlas@1',
          amount: 100n,
          owner: 'i2',
          now: 2000,
          expiresAt: 9_000,
        }),
      ).toEqual({ ok: true })
      expect(
        await store.ledger.capture({
          requestId: 'r2',
          cost: 30n,
          payeeId: ids.payee!,
          fee: 3n,
          feeAccountId: ids.fees!,
          now: 2001,
          usage: usageRecord('r2', ids.user!, 30n),
        }),
      ).toBe(true)
      expect(await written(store)).toEqual(before)
      const r2 = await store.db
        .selectFrom('postings')
        .select(['id', 'account_id', 'book', 'kind', 'amount'])
        .where('ref', '=', 'r2')
        .orderBy('kind')
        .orderBy('book')
        .execute()
      expect(r2.map((p) => [p.id, Number(p.account_id), p.book, p.kind, BigInt(p.amount)])).toEqual([
        [null, ids.user, 'held', 'capture', -30n],
        [null, ids.fees, 'pending', 'fee', 3n],
        [null, ids.user, 'available', 'hold', -100n],
        [null, ids.user, 'held', 'hold', 100n],
        [null, ids.payee, 'pending', 'payout', 27n],
        [null, ids.user, 'available', 'release', 70n],
        [null, ids.user, 'held', 'release', -70n],
      ])
      expect(await store.settlement.payeeTotals(ids.payee!)).toEqual({ pending: 65n, settled: 0n })
      expect(await store.accounts.books(ids.fees!)).toEqual({ available: 0n, held: 0n, pending: 5n })
      expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
    } finally {
      await store.close()
      await dropSchema(url)
    }
  })
})
