import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from '../store.js'
import { spendableOf } from '../accounts.js'
import { openStore } from '../open.js'
import { sql } from 'kysely'
import { STORE_KINDS, postgresReachable } from '../../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../../test/helpers/store-fixture.js'

const usage = (requestId: string, accountId: number, cost: bigint) =>
  usageRecord(requestId, accountId, cost, { upstreamPromptTokens: 9, upstreamCompletionTokens: 5 })

const HOLD = { keyId: 'key_1', model: 'svc/atlas@1', owner: 'i1', now: 1000 }

describe.each(STORE_KINDS)('ledger on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let user: number
  let payee: number
  let fees: number

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    ;({ store, user, payee, fees } = f)
    await store.accounts.deposit({ id: user, amount: 1_000n, ref: 'dep_1', now: 1000 })
    await store.accounts.approve(user, 800n)
  })
  afterAll(() => closeFixture(f))

  const hold = (requestId: string, amount: bigint, expiresAt = 10_000) =>
    store.ledger.hold({ ...HOLD, requestId, accountId: user, amount, expiresAt })

  it('holds within min(balance, cap) and refuses beyond it', async () => {
    expect(await hold('r1', 500n)).toEqual({ ok: true })
    const refused = await hold('r2', 301n)
    expect(refused.ok).toBe(false)
    if (!refused.ok) {
      expect(refused.reason).toBe('insufficient')
      expect(spendableOf(refused.account!)).toBe(300n)
    }
    expect(await hold('r2', 300n)).toEqual({ ok: true })
    // A negative hold, or one past the store's integers, is no amount: refused before any write.
    await expect(hold('r_neg', -1n)).rejects.toThrow(/not an amount/)
    await expect(hold('r_big', 2n ** 63n)).rejects.toThrow(/not an amount/)
    expect((await store.accounts.byId(user))!.held).toBe(800n)
  })

  it('captures once, releases the rest, pays payee and fee', async () => {
    // A fee above the cost, or a negative amount, is no charge: refused before any write, the hold stays open.
    await expect(
      store.ledger.capture({
        requestId: 'r1',
        cost: 5n,
        payeeId: payee,
        fee: 6n,
        feeAccountId: fees,
        now: 1001,
        usage: usage('r1', user, 5n),
      }),
    ).rejects.toThrow(/not a charge/)
    await expect(
      store.ledger.capture({
        requestId: 'r1',
        cost: -1n,
        payeeId: payee,
        fee: 0n,
        feeAccountId: fees,
        now: 1001,
        usage: usage('r1', user, 0n),
      }),
    ).rejects.toThrow(/not a charge/)
    // More than the hold is a bug upstream of the ledger: refused, the hold left open.
    await expect(
      store.ledger.capture({
        requestId: 'r1',
        cost: 501n,
        payeeId: payee,
        fee: 0n,
        feeAccountId: fees,
        now: 1001,
        usage: usage('r1', user, 501n),
      }),
    ).rejects.toThrow(/exceeds hold 500/)
    expect(
      await store.ledger.capture({
        requestId: 'r1',
        cost: 120n,
        payeeId: payee,
        fee: 6n,
        feeAccountId: fees,
        now: 1001,
        usage: usage('r1', user, 120n),
      }),
    ).toBe(true)
    expect(
      await store.ledger.capture({
        requestId: 'r1',
        cost: 120n,
        payeeId: payee,
        fee: 6n,
        feeAccountId: fees,
        now: 1002,
        usage: usage('r1', user, 120n),
      }),
    ).toBe(false)
    const a = (await store.accounts.byId(user))!
    expect(a.balance).toBe(880n)
    expect(a.held).toBe(300n)
    expect(a.cap).toBe(680n)
    expect((await store.accounts.books(payee)).pending).toBe(114n)
    expect((await store.accounts.books(fees)).pending).toBe(6n)
    expect((await store.usage.get(user, 'r1'))?.cost).toBe(120n)
  })

  it('releases a hold once and never captures it afterwards', async () => {
    expect(await store.ledger.release('r2', 1003, { ...usage('r2', user, 0n), outcome: 'no_capacity' })).toBe(true)
    expect(await store.ledger.release('r2', 1003, { ...usage('r2', user, 0n), outcome: 'no_capacity' })).toBe(false)
    expect(
      await store.ledger.capture({
        requestId: 'r2',
        cost: 1n,
        payeeId: payee,
        fee: 0n,
        feeAccountId: fees,
        now: 1004,
        usage: usage('r2', user, 1n),
      }),
    ).toBe(false)
    expect((await store.accounts.byId(user))!.held).toBe(0n)
  })

  it('sweeps expired holds, and the holds of dead or unregistered owners', async () => {
    await store.instances.register({ id: 'i1', host: 'h', pid: 1, startedAt: 1000 })
    await hold('r3', 10n, 1500)
    const other = (requestId: string, owner: string) =>
      store.ledger.hold({
        requestId,
        accountId: user,
        keyId: 'key_1',
        model: 'm',
        amount: 10n,
        owner,
        now: 1000,
        expiresAt: 99_999,
      })
    await other('r4', 'dead')
    await other('r5', 'gone')
    expect((await store.accounts.byId(user))!.held).toBe(30n)
    expect(await store.ledger.openHolds()).toBe(3)
    expect(await store.ledger.releaseExpired(2000)).toBe(1)
    expect(await store.ledger.releaseOwnedBy(['dead'], 2000)).toBe(1)
    expect((await store.usage.get(user, 'r3'))?.outcome).toBe('expired')
    // A dead owner's holds were only counted: they leave no record. Its closes find nothing held, and it holds no more.
    expect(await store.usage.get(user, 'r4')).toBeUndefined()
    expect(
      await store.ledger.capture({
        requestId: 'r4',
        cost: 1n,
        payeeId: payee,
        fee: 0n,
        feeAccountId: fees,
        now: 2001,
        usage: usage('r4', user, 1n),
      }),
    ).toBe(false)
    await expect(other('r6', 'dead')).rejects.toThrow()
    // 'gone' never registered (or stopped with a hold open); i1 is registered, and 'dead' has nothing left.
    expect(await store.ledger.releaseUnregistered(2000)).toBe(1)
    expect(await store.ledger.openHolds()).toBe(0)
    expect((await store.accounts.byId(user))!.held).toBe(0n)
    expect(await store.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
  })

  it('settles a batch once; a replay changes nothing', async () => {
    const batch = await store.settlement.createBatch({ id: 'b1', feeAccountId: fees, now: 3000 })
    expect(batch?.total).toBe(120n)
    expect(await store.settlement.createBatch({ id: 'b2', feeAccountId: fees, now: 3000 })).toBeNull()
    expect(await store.settlement.markSettled('b1', 3001)).toBe(true)
    expect(await store.settlement.markSettled('b1', 3002)).toBe(false)
    expect(await store.settlement.payeeTotals(payee)).toEqual({ pending: 0n, settled: 114n })
    const audit = await store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
    expect(audit.inconsistent).toEqual([])
  })

  it('extends the leases of the requests being served, and of no others', async () => {
    await hold('lease_1', 10n, 1500)
    await hold('lease_2', 10n, 1500)
    await hold('lease_3', 10n, 1500)
    // lease_2's request left it open (its release failed), so it is not among those served.
    const serving = Array.from({ length: 1200 }, (_, i) => `req_${i}`)
    await store.ledger.extendLeases(['lease_1', ...serving, 'lease_3'], 50_000)
    expect(await store.ledger.releaseExpired(2000)).toBe(1)
    expect((await store.usage.get(user, 'lease_2'))?.outcome).toBe('expired')
    expect(await store.ledger.releaseExpired(60_000)).toBe(2)
    expect(await store.ledger.openHolds()).toBe(0)
  })

  it('posts what each request moved, in order, and no posting of nothing', async () => {
    // A request's postings are derived from its row (no ids of their own): put in the order they were made.
    const order = ['hold', 'release', 'capture', 'payout', 'fee'].flatMap((kind) => [
      `${kind} held`,
      `${kind} available`,
      `${kind} pending`,
    ])
    const postings = async (ref: string) =>
      (
        await store.db
          .selectFrom('postings')
          .select(['account_id', 'book', 'kind', 'amount', 'created_at'])
          .where('ref', '=', ref)
          .execute()
      )
        .sort((a, b) => order.indexOf(`${a.kind} ${a.book}`) - order.indexOf(`${b.kind} ${b.book}`))
        .map((p) => [Number(p.account_id), p.book, p.kind, BigInt(p.amount), Number(p.created_at)])
    expect(await postings('r1')).toEqual([
      [user, 'held', 'hold', 500n, 1000],
      [user, 'available', 'hold', -500n, 1000],
      [user, 'held', 'release', -380n, 1001],
      [user, 'available', 'release', 380n, 1001],
      [user, 'held', 'capture', -120n, 1001],
      [payee, 'pending', 'payout', 114n, 1001],
      [fees, 'pending', 'fee', 6n, 1001],
    ])
    expect(await postings('r2')).toEqual([
      [user, 'held', 'hold', 300n, 1000],
      [user, 'available', 'hold', -300n, 1000],
      [user, 'held', 'release', -300n, 1003],
      [user, 'available', 'release', 300n, 1003],
    ])
    // Captured whole and without a fee: nothing released, nothing to the fee account.
    expect(await hold('r6', 50n)).toEqual({ ok: true })
    expect(
      await store.ledger.capture({
        requestId: 'r6',
        cost: 50n,
        payeeId: payee,
        fee: 0n,
        feeAccountId: fees,
        now: 1005,
        usage: usage('r6', user, 50n),
      }),
    ).toBe(true)
    expect(await postings('r6')).toEqual([
      [user, 'held', 'hold', 50n, 1000],
      [user, 'available', 'hold', -50n, 1000],
      [user, 'held', 'capture', -50n, 1005],
      [payee, 'pending', 'payout', 50n, 1005],
    ])
    // Nothing charged: the whole hold released, nothing captured or paid.
    expect(await hold('r7', 20n)).toEqual({ ok: true })
    expect(
      await store.ledger.capture({
        requestId: 'r7',
        cost: 0n,
        payeeId: payee,
        fee: 0n,
        feeAccountId: fees,
        now: 1006,
        usage: usage('r7', user, 0n),
      }),
    ).toBe(true)
    expect(await postings('r7')).toEqual([
      [user, 'held', 'hold', 20n, 1000],
      [user, 'available', 'hold', -20n, 1000],
      [user, 'held', 'release', -20n, 1006],
      [user, 'available', 'release', 20n, 1006],
    ])
    expect(await store.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
  })

  it.skipIf(kind === 'postgres')(
    'audits a store that refuses writes (query_only, as after a failed sync)',
    async () => {
      await sql`pragma query_only = on`.execute(store.db)
      try {
        expect(await store.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
      } finally {
        await sql`pragma query_only = off`.execute(store.db)
      }
    },
  )

  // Each audit reads the postings, the counted holds and the accounts: a close committed between two of those reads
  // would show a balance that differs from its postings, a mismatch that is not there. The requests are another
  // gateway's, on a connection of its own. On SQLite only another process could commit between the audit's reads (its
  // statements run one after another in one turn of this event loop, and a second store here commits between turns),
  // so this runs on Postgres.
  it.skipIf(kind === 'sqlite')('audits one state of the ledger while requests close beside it', async () => {
    const other = await openStore(f!.url, () => 1000)
    let closing = true
    const requests = (async () => {
      for (let i = 0; closing; i++) {
        const id = `snap_${i}`
        await other.ledger.hold({
          requestId: id,
          accountId: user,
          keyId: 'key_1',
          model: 'svc/atlas@1',
          amount: 10n,
          owner: 'i2',
          now: 1000,
          expiresAt: 10_000,
        })
        await other.ledger.capture({
          requestId: id,
          cost: 1n + BigInt(i % 7),
          payeeId: payee,
          fee: 1n,
          feeAccountId: fees,
          now: 1010,
          usage: usage(id, user, 1n + BigInt(i % 7)),
        })
      }
    })()
    try {
      for (let n = 0; n < 60; n++)
        expect(await store.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
    } finally {
      closing = false
      await requests
      await other.close()
    }
  })
})
