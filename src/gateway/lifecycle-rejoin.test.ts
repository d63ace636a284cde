import { afterEach, describe, expect, it } from 'vitest'
import { openStore } from '../store/open.js'
import type { Store } from '../store/store.js'
import { InstanceLifecycle } from './lifecycle.js'
import { usageRecord } from '../../test/helpers/store-fixture.js'

let store: Store | undefined
let life: InstanceLifecycle | undefined
afterEach(async () => {
  await life?.stop()
  await store?.close()
})

describe('an instance another gateway took for dead', () => {
  it('registers again under a new id on its next heartbeat; the holds of its old id are closed as abandoned', async () => {
    store = await openStore('sqlite::memory:')
    const s = store
    const user = (await s.accounts.ensure('0x1111111111111111111111111111111111111111', 'user', 1000)).account.id
    const payee = (await s.accounts.ensure('0x2222222222222222222222222222222222222222', 'provider', 1000)).account.id
    const fees = (await s.accounts.byAddress('svc:fees'))!.id
    await s.accounts.deposit({ id: user, amount: 1_000n, ref: 'dep_1', now: 1000 })
    await s.accounts.approve(user, 1_000n)
    life = new InstanceLifecycle({
      store: s,
      id: 'gw_paused',
      holdTtlMs: 60_000,
      now: Date.now,
      onError: (err) => {
        throw err
      },
    })
    await life.start()
    const hold = (requestId: string) =>
      s.ledger.hold({
        requestId,
        accountId: user,
        keyId: 'key_1',
        model: 'svc/atlas@1',
        amount: 100n,
        owner: life!.id,
        now: 1000,
        expiresAt: Date.now() + 60_000,
      })
    const capture = (requestId: string) =>
      s.ledger.capture({
        requestId,
        cost: 40n,
        payeeId: payee,
        fee: 0n,
        feeAccountId: fees,
        now: 1001,
        usage: usageRecord(requestId, user, 40n),
      })
    expect(await hold('before')).toEqual({ ok: true })

    // A peer saw a stale heartbeat (a long pause), released this instance's holds and removed it.
    expect(await s.ledger.releaseOwnedBy(['gw_paused'], Date.now())).toBe(1)
    await s.instances.remove(['gw_paused'])
    await expect.poll(() => life!.id, { timeout: 5_000 }).not.toBe('gw_paused')
    expect((await s.instances.list()).map((i) => i.id)).toEqual([life.id])
    expect(life.id).toMatch(/^gw_[0-9a-f]{16}$/)

    // The old id's hold closes as abandoned, uncharged; the new id holds and charges as before.
    expect(await capture('before')).toBe(false)
    expect(await s.usage.get(user, 'before')).toMatchObject({ outcome: 'abandoned', cost: 0n })
    expect(await hold('after')).toEqual({ ok: true })
    expect(await capture('after')).toBe(true)
    expect(await s.accounts.byId(user)).toMatchObject({ balance: 960n, held: 0n })
    expect(await s.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })
})
