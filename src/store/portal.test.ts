import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from './store.js'
import { DAY_MS } from './usage.js'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'

/** The portal's queries: nonces, sessions, usage totals and days, what a payee earned. */
describe.each(STORE_KINDS)('portal store on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let user: number
  let other: number
  let payee: number
  let fees: number
  const day0 = 20_000 * DAY_MS

  const record = (
    requestId: string,
    accountId: number,
    { keyId, model, cost, createdAt }: { keyId: string; model: string; cost: bigint; createdAt: number },
  ) => usageRecord(requestId, accountId, cost, { keyId, model, servedModel: model, createdAt })

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    ;({ store, user, other, payee, fees } = f)
    await store.ledger.record(
      record('u1', user, { keyId: 'key_a', model: 'svc/atlas@1', cost: 100n, createdAt: day0 + 5 }),
    )
    await store.ledger.record(
      record('u2', user, { keyId: 'key_a', model: 'svc/tern@2', cost: 20n, createdAt: day0 + DAY_MS - 1 }),
    )
    await store.ledger.record(
      record('u3', user, { keyId: 'key_b', model: 'svc/atlas@1', cost: 3n, createdAt: day0 + 2 * DAY_MS + 7 }),
    )
    await store.ledger.record(
      record('u4', other, { keyId: 'key_c', model: 'svc/atlas@1', cost: 999n, createdAt: day0 + 5 }),
    )
  })
  afterAll(() => closeFixture(f))

  it('uses a nonce once, and refuses an expired or unknown one', async () => {
    await store.portal.issueNonce('n1', 1000, 2000)
    await store.portal.issueNonce('n2', 1000, 1500)
    expect(await store.portal.consumeNonce('n1', 1999)).toBe('ok')
    expect(await store.portal.consumeNonce('n1', 1999)).toBe('unknown')
    expect(await store.portal.consumeNonce('n2', 1500)).toBe('expired')
    expect(await store.portal.consumeNonce('never', 1000)).toBe('unknown')
  })

  it('sweeps expired nonces when issuing', async () => {
    await store.portal.issueNonce('old', 1000, 1100)
    await store.portal.issueNonce('new', 1200, 1500)
    expect(await store.portal.consumeNonce('old', 1000)).toBe('unknown')
    expect(await store.portal.consumeNonce('new', 1300)).toBe('ok')
  })

  it('finds live sessions only', async () => {
    await store.portal.createSession({
      id: 's1',
      accountId: user,
      address: '0x1111111111111111111111111111111111111111',
      csrf: 'c1',
      createdAt: 1000,
      expiresAt: 5000,
    })
    expect(await store.portal.session('s1', 4999)).toMatchObject({ accountId: user, csrf: 'c1', expiresAt: 5000 })
    expect(await store.portal.session('s1', 5000)).toBeUndefined()
    await store.portal.deleteSession('s1')
    expect(await store.portal.session('s1', 1001)).toBeUndefined()
  })

  it("totals an account's usage, filtered by key and model", async () => {
    expect(await store.usage.totals(user)).toEqual({ requests: 3, promptTokens: 30, completionTokens: 15, cost: 123n })
    expect(await store.usage.totals(user, { keyId: 'key_a' })).toMatchObject({ requests: 2, cost: 120n })
    expect(await store.usage.totals(user, { model: 'svc/atlas@1' })).toMatchObject({ requests: 2, cost: 103n })
    expect(await store.usage.totals(user, { keyId: 'key_c' })).toMatchObject({ requests: 0, cost: 0n })
  })

  it('sums spend per UTC day', async () => {
    expect(await store.usage.daily(user)).toEqual([
      { day: day0, requests: 2, cost: 120n },
      { day: day0 + 2 * DAY_MS, requests: 1, cost: 3n },
    ])
    expect(await store.usage.daily(user, { since: day0 + DAY_MS })).toEqual([
      { day: day0 + 2 * DAY_MS, requests: 1, cost: 3n },
    ])
  })

  it('reports what a payee earned and the batches that pay it', async () => {
    await store.accounts.deposit({ id: user, amount: 1_000n, ref: 'dep_1', now: 1000 })
    await store.accounts.approve(user, 1_000n)
    const usage = (id: string) =>
      record(id, user, { keyId: 'key_a', model: 'svc/atlas@1', cost: 100n, createdAt: 1000 })
    for (const id of ['h1', 'h2']) {
      await store.ledger.hold({
        requestId: id,
        accountId: user,
        keyId: 'key_a',
        model: 'svc/atlas@1',
        amount: 200n,
        owner: 'i1',
        now: 1000,
        expiresAt: 10_000,
      })
      await store.ledger.capture({
        requestId: id,
        cost: 100n,
        payeeId: payee,
        fee: 5n,
        feeAccountId: fees,
        now: 1001,
        usage: usage(id),
      })
    }
    expect(await store.settlement.payeeEarnings(payee)).toEqual({ requests: 2, gross: 200n, earned: 190n })
    expect(await store.settlement.payeeEarnings(user)).toEqual({ requests: 0, gross: 0n, earned: 0n })
    await store.settlement.createBatch({ id: 'b1', feeAccountId: fees, now: 2000 })
    await store.settlement.markSettled('b1', 2001)
    const batches = await store.settlement.payeeBatches(payee)
    expect(batches).toHaveLength(1)
    expect(batches[0]).toMatchObject({ id: 'b1', status: 'settled', amount: 190n, settledAt: 2001 })
    expect(await store.settlement.payeeBatches(other)).toEqual([])
  })

  it('lists what a batch paid a payee, without the legs of payers it failed to collect', async () => {
    await store.accounts.deposit({ id: other, amount: 1_000n, ref: 'dep_2', now: 1000 })
    await store.accounts.approve(other, 1_000n)
    for (const [id, payer] of [
      ['h3', user],
      ['h4', other],
    ] as const) {
      await store.ledger.hold({
        requestId: id,
        accountId: payer,
        keyId: 'key_a',
        model: 'svc/atlas@1',
        amount: 200n,
        owner: 'i1',
        now: 1000,
        expiresAt: 10_000,
      })
      await store.ledger.capture({
        requestId: id,
        cost: 100n,
        payeeId: payee,
        fee: 5n,
        feeAccountId: fees,
        now: 1001,
        usage: record(id, payer, { keyId: 'key_a', model: 'svc/atlas@1', cost: 100n, createdAt: 1000 }),
      })
    }
    await store.settlement.createBatch({ id: 'b2', feeAccountId: fees, now: 3000 })
    expect(await store.settlement.markSettled('b2', 3001, [other])).toBe(true)
    const batches = await store.settlement.payeeBatches(payee)
    expect(batches.map((b) => [b.id, b.amount])).toEqual([
      ['b2', 95n],
      ['b1', 190n],
    ])
    // What the list says was paid is what the payee's settled postings hold.
    expect((await store.settlement.payeeTotals(payee)).settled).toBe(285n)
  })
})
