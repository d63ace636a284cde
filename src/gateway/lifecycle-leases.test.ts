import { afterEach, describe, expect, it } from 'vitest'
import { openFixture, closeFixture, type StoreFixture } from '../../test/helpers/store-fixture.js'
import { InstanceLifecycle } from './lifecycle.js'

let f: StoreFixture | undefined
afterEach(() => closeFixture(f))

/** A store with a funded user, and a lifecycle over it whose clock is `clock`. */
async function lifecycleOn(id: string, ttlMs: number, clock: () => number) {
  f = await openFixture('sqlite')
  const { store, user } = f
  await store.accounts.deposit({ id: user, amount: 1_000n, ref: 'dep_1', now: 1000 })
  await store.accounts.approve(user, 1_000n)
  const life = new InstanceLifecycle({
    store,
    id,
    holdTtlMs: ttlMs,
    now: clock,
    onError: (err) => {
      throw err
    },
  })
  return { store, user, life }
}

/** A request as the pipeline tells the lifecycle it was admitted. */
const inFlight = (requestId: string) => ({
  requestId,
  accountId: 1,
  keyId: 'key_1',
  model: 'm',
  stream: false,
  promptTokens: 1,
  createdAt: 1000,
})

describe("an instance's heartbeat", () => {
  it('extends the leases of the requests it serves, so a hold its request left open expires and is swept', async () => {
    let t = 1000
    const { store, user, life } = await lifecycleOn('gw_a', 5_000, () => t)
    await store.instances.register({ id: life.id, host: life.host, pid: process.pid, startedAt: t })
    const hold = (requestId: string) =>
      store.ledger.hold({
        requestId,
        accountId: user,
        keyId: 'key_1',
        model: 'svc/atlas@1',
        amount: 100n,
        owner: life.id,
        now: t,
        expiresAt: t + 5_000,
      })
    expect(await hold('served')).toEqual({ ok: true })
    expect(await hold('left_open')).toEqual({ ok: true })
    life.admitted(inFlight('served'))
    life.admitted(inFlight('left_open'))
    // Its request is over, but the release failed: the hold stays open in the store.
    life.released('left_open')

    t += 4_000
    await life.heartbeat()
    t += 2_000
    expect(await life.sweep()).toBe(1)
    expect(await store.ledger.openHolds(user)).toBe(1)
    expect((await store.accounts.byId(user))!.held).toBe(100n)

    // The request served until now ends too, without settling its hold: it expires one lease later.
    life.released('served')
    await life.heartbeat()
    t += 4_000
    expect(await life.sweep()).toBe(1)
    expect((await store.accounts.byId(user))!.held).toBe(0n)
    expect(await store.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })
})

describe("a peer's holds", () => {
  it('stay while its heartbeat moves, whatever its clock says, and are released once it stops', async () => {
    // The peer's clock runs 20 s behind this instance's: its heartbeats look 20 s old here.
    let mine = 100_000
    const theirs = () => mine - 20_000
    const { store, user, life } = await lifecycleOn('gw_here', 600_000, () => mine)
    await store.instances.register({ id: 'gw_there', host: 'another-host', pid: 1, startedAt: theirs() })
    expect(
      await store.ledger.hold({
        requestId: 'theirs',
        accountId: user,
        keyId: 'key_1',
        model: 'svc/atlas@1',
        amount: 100n,
        owner: 'gw_there',
        now: theirs(),
        expiresAt: theirs() + 600_000,
      }),
    ).toEqual({ ok: true })
    for (let i = 0; i < 6; i++) {
      expect(await life.sweep()).toBe(0)
      mine += 5_000
      await store.instances.heartbeat('gw_there', theirs())
    }
    expect(await life.sweep()).toBe(0)
    // It stops: once this clock has seen its last heartbeat stand still for 15 s, its holds go.
    mine += 15_000
    expect(await life.sweep()).toBe(0)
    mine += 1
    expect(await life.sweep()).toBe(1)
    expect((await store.instances.list()).map((i) => i.id)).toEqual([])
    expect((await store.accounts.byId(user))!.held).toBe(0n)
  })
})
