import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from './store.js'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../test/helpers/store-fixture.js'

/** Batches under a leg limit: no batch carries more legs than one chain transaction may, and every charge goes in one batch. */
describe.each(STORE_KINDS)('batches with a leg limit on %s', (kind) => {
  let f: StoreFixture | undefined
  let store: Store
  let alice: number
  let bob: number
  let fees: number
  const providers: number[] = []
  let n = 0

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    ;({ store, user: alice, other: bob, fees } = f)
    providers.push(f.payee)
    for (const a of ['0x5555555555555555555555555555555555555555', '0x6666666666666666666666666666666666666666']) {
      providers.push((await store.accounts.ensure(a, 'provider', 1000)).account.id)
    }
    for (const id of [alice, bob]) {
      expect(await store.accounts.deposit(id, 1_000_000n, `dep_${id}`, 1000)).not.toBeNull()
      await store.accounts.approve(id, 1_000_000n)
    }
  })
  afterAll(() => closeFixture(f))

  const charge = async (accountId: number, payeeId: number, cost: bigint) => {
    const requestId = `r${n++}`
    expect(await store.ledger.hold({ requestId, accountId, keyId: 'key_1', model: 'm', amount: cost, owner: 'i1', now: 1000, expiresAt: 99_999 })).toEqual({ ok: true })
    expect(await store.ledger.capture({ requestId, cost, payeeId, fee: cost / 10n, feeAccountId: fees, now: 1001, usage: usageRecord(requestId, accountId, cost) })).toBe(true)
  }

  /** Batches until nothing is due; the legs of each. */
  const drain = async (prefix: string, maxLegs: number) => {
    const out: { total: bigint; legs: Awaited<ReturnType<Store['settlement']['legs']>> }[] = []
    for (let i = 0; ; i++) {
      const batch = await store.settlement.createBatch(`${prefix}_${i}`, fees, 2000 + i, { maxLegs })
      if (!batch) return out
      out.push({ total: batch.total, legs: await store.settlement.legs(batch.id) })
      expect(i).toBeLessThan(10)
    }
  }

  it('splits a payer whose payees and fee need more legs than a batch may carry', async () => {
    for (const p of providers) await charge(alice, p, 1_000n)
    await charge(alice, providers[0]!, 500n)
    const batches = await drain('b_split', 2)
    for (const b of batches) expect(b.legs.length).toBeLessThanOrEqual(2)
    // Three payees, each paid once: its own charges in one batch, with the fee leg beside them.
    expect(batches).toHaveLength(3)
    expect(batches.map((b) => b.legs.map((l) => l.payeeId))).toEqual(providers.map((p) => [p, fees].sort((a, b) => a - b)))
    expect(batches.reduce((s, b) => s + b.total, 0n)).toBe(3_500n)
    expect(batches[0]!.legs.find((l) => l.payeeId === providers[0])!.amount).toBe(1_350n)
  })

  it('fills a batch with whole payers and starts the next with what did not fit', async () => {
    for (const p of providers) await charge(alice, p, 100n)
    await charge(bob, providers[0]!, 100n)
    const batches = await drain('b_fill', 3)
    for (const b of batches) expect(b.legs.length).toBeLessThanOrEqual(3)
    const legs = batches.flatMap((b) => b.legs)
    // Every charge settled exactly once: one leg per payer and payee, one fee leg per payer and batch.
    expect(legs.filter((l) => l.payeeId !== fees).map((l) => `${l.payerId}:${l.payeeId}`).sort()).toEqual(
      [...providers.map((p) => `${alice}:${p}`), `${bob}:${providers[0]}`].sort(),
    )
    expect(batches.reduce((s, b) => s + b.total, 0n)).toBe(400n)
  })
})
