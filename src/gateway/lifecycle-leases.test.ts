import { afterEach, describe, expect, it } from 'vitest'
import { openFixture, closeFixture, type StoreFixture } from '../../test/helpers/store-fixture.js'
import { InstanceLifecycle } from './lifecycle.js'

let f: StoreFixture | undefined
afterEach(() => closeFixture(f))

describe("an instance's heartbeat", () => {
  it('extends the leases of the requests it serves, so a hold its request left open expires and is swept', async () => {
    f = await openFixture('sqlite')
    const { store, user } = f
    await store.accounts.deposit(user, 1_000n, 'dep_1', 1000)
    await store.accounts.approve(user, 1_000n)
    let t = 1000
    const life = new InstanceLifecycle(store, 'gw_a', 5_000, () => t, (err) => {
      throw err
    })
    await store.instances.register({ id: life.id, host: life.host, pid: process.pid, startedAt: t })
    const hold = (requestId: string) =>
      store.ledger.hold({ requestId, accountId: user, keyId: 'key_1', model: 'svc/atlas@1', amount: 100n, owner: life.id, now: t, expiresAt: t + 5_000 })
    expect(await hold('served')).toEqual({ ok: true })
    expect(await hold('left_open')).toEqual({ ok: true })
    life.admitted('served')
    life.admitted('left_open')
    // Its request is over, but the release failed: the hold stays open in the store.
    life.settled('left_open')

    t += 4_000
    await life.heartbeat()
    t += 2_000
    expect(await life.sweep()).toBe(1)
    expect(await store.ledger.openHolds(user)).toBe(1)
    expect((await store.accounts.byId(user))!.held).toBe(100n)

    // The request served until now ends too, without settling its hold: it expires one lease later.
    life.settled('served')
    await life.heartbeat()
    t += 4_000
    expect(await life.sweep()).toBe(1)
    expect((await store.accounts.byId(user))!.held).toBe(0n)
    expect(await store.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })
})
