import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import pg from 'pg'
import { sql } from 'kysely'
import { openPostgres } from './open.js'
import { DATABASE_URL, dropSchema, freshPostgresUrl, postgresReachable } from '../../../test/helpers/stores.js'
import { closeFixture, openFixture, type StoreFixture } from '../../../test/helpers/store-fixture.js'

/** The Postgres connection the way production meets it: connections that die, processes that start together. */
describe('a Postgres store', () => {
  let f: StoreFixture | undefined
  beforeAll(async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    f = await openFixture('postgres')
  })
  afterAll(() => closeFixture(f))

  it('outlives its connections being ended by the server, and goes on with new ones', async () => {
    const { store, user } = f!
    // Several connections at once, so the pool keeps several idle.
    const pids = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const r = await sql<{ pid: number }>`select pg_backend_pid() as pid, pg_sleep(0.05)`.execute(store.db)
        return r.rows[0]!.pid
      }),
    )
    const admin = new pg.Client({ connectionString: DATABASE_URL })
    await admin.connect()
    try {
      // What a database restart or an idle-connection reaper does: an unheard 'error' event would end this process.
      await admin.query('select pg_terminate_backend(pid) from unnest($1::int[]) as pid', [[...new Set(pids)]])
    } finally {
      await admin.end()
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(await store.accounts.byId(user)).toMatchObject({ id: user })
    expect(
      await store.ledger.hold({
        requestId: 'after',
        accountId: user,
        keyId: 'k',
        model: 'm',
        amount: 0n,
        owner: 'i1',
        now: 1000,
        expiresAt: 9000,
      }),
    ).toEqual({ ok: true })
  })

  it('outlives a connection ended in the middle of a transaction: that transaction fails, nothing else', async () => {
    const { store, user } = f!
    const admin = new pg.Client({ connectionString: DATABASE_URL })
    await admin.connect()
    try {
      const pending = store.db.transaction().execute(async (trx) => {
        const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)
        await admin.query('select pg_terminate_backend($1)', [rows[0]!.pid])
        await sql`select pg_sleep(1)`.execute(trx)
      })
      await expect(pending).rejects.toThrow()
    } finally {
      await admin.end()
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(await store.accounts.byId(user)).toMatchObject({ id: user })
  })

  it('opens a new schema from several processes at once', async () => {
    for (let round = 0; round < 10; round++) {
      const url = freshPostgresUrl()
      try {
        const handles = await Promise.all(Array.from({ length: 4 }, () => openPostgres(url, 2)))
        await Promise.all(handles.map((h) => h.db.destroy()))
      } finally {
        await dropSchema(url)
      }
    }
  })
})
