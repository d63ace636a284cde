import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type pg from 'pg'
import { openPostgres, type PostgresHandle } from './open.js'
import { PostgresHotLedger } from './hot-ledger.js'
import { postgresDialect } from './dialect.js'
import { LedgerRepo } from '../ledger/repo.js'
import type { HoldRequest } from '../ledger/types.js'
import { postgresReachable } from '../../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../../test/helpers/store-fixture.js'

/**
 * A pool whose hold statements can commit and then lose their answer (the connection dropped after the commit), or
 * answer late: what `Recount` is for.
 */
function lossy(pool: pg.Pool) {
  const query = pool.query.bind(pool) as (config: unknown, values?: unknown) => Promise<unknown>
  const faults = { loseNext: false, holdBack: undefined as Promise<void> | undefined }
  pool.query = (async (config: unknown, values?: unknown) => {
    const r = await query(config, values)
    if ((config as { name?: string })?.name !== 'svc_hold') return r
    if (faults.holdBack) await faults.holdBack
    if (faults.loseNext) {
      faults.loseNext = false
      throw new Error('Connection terminated unexpectedly')
    }
    return r
  }) as typeof pool.query
  return faults
}

describe('holds whose answer was lost, on postgres', () => {
  let f: StoreFixture | undefined
  let h: PostgresHandle | undefined

  beforeAll(async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    f = await openFixture('postgres')
  })
  afterAll(async () => {
    await h?.db.destroy()
    await closeFixture(f)
  })

  it('are counted out of the instance counter and the account at the next sweep, and nothing else is', async () => {
    const { store, user, payee, fees } = f!
    h = await openPostgres(f!.url)
    const faults = lossy(h.pool)
    const hot = new PostgresHotLedger(h.pool, () => Promise.reject(new Error('no rate take in this test')))
    const ledger = new LedgerRepo(store.db, hot, postgresDialect)
    await store.accounts.deposit({ id: user, amount: 1_000n, ref: 'dep_1', now: 1000 })
    await store.accounts.approve(user, 1_000n)
    const hold = (requestId: string, amount: bigint): HoldRequest => ({
      requestId,
      accountId: user,
      keyId: 'k',
      model: 'm',
      amount,
      owner: 'i1',
      now: 1000,
      expiresAt: 9000,
    })
    const counted = async () => {
      const c = await store.db
        .selectFrom('owner_holds')
        .select(['held', 'open'])
        .where('owner', '=', 'i1')
        .where('account_id', '=', user)
        .executeTakeFirstOrThrow()
      return { counter: BigInt(c.held), open: Number(c.open), account: (await store.accounts.byId(user))!.held }
    }

    expect(await ledger.hold(hold('r1', 100n))).toEqual({ ok: true })
    faults.loseNext = true
    await expect(ledger.hold(hold('r2', 200n))).rejects.toThrow(/terminated/)
    // Committed, unknown to the instance: 200 more held than it has.
    expect(await counted()).toEqual({ counter: 300n, open: 2, account: 300n })

    // A hold that committed but whose answer is still on its way must not be taken for lost: the sweep's recount
    // waits for it, and holds that come meanwhile wait for the recount.
    let answer!: () => void
    faults.holdBack = new Promise((resolve) => (answer = resolve))
    const late = ledger.hold(hold('r3', 50n))
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(await counted()).toEqual({ counter: 350n, open: 3, account: 350n })
    const sweep = ledger.releaseExpired(1000)
    await new Promise((resolve) => setTimeout(resolve, 50))
    const waiting = ledger.hold(hold('r5', 5n))
    faults.holdBack = undefined
    answer()
    expect(await late).toEqual({ ok: true })

    // The sweep recounts: what the instance holds (r1, r3, then r5) stays held, the lost hold is spendable again.
    expect(await sweep).toBe(1)
    expect(await waiting).toEqual({ ok: true })
    expect(await counted()).toEqual({ counter: 155n, open: 3, account: 155n })
    expect(await ledger.releaseExpired(1000)).toBe(0)
    expect(await ledger.release('r5', 1001, usageRecord('r5', user, 0n))).toBe(true)
    for (const [requestId, cost] of [
      ['r1', 40n],
      ['r3', 50n],
    ] as const) {
      expect(
        await ledger.capture({
          requestId,
          cost,
          payeeId: payee,
          fee: 0n,
          feeAccountId: fees,
          now: 1001,
          usage: usageRecord(requestId, user, cost),
        }),
      ).toBe(true)
    }
    expect(await counted()).toEqual({ counter: 0n, open: 0, account: 0n })
    expect(await ledger.hold(hold('r4', 910n))).toEqual({ ok: true })
    expect(await ledger.release('r4', 1002, usageRecord('r4', user, 0n))).toBe(true)
    expect(await store.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })
})
