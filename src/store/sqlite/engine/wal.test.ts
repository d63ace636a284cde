import { statSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { openStore } from '../../open.js'
import { SYSTEM_ACCOUNTS } from '../../accounts.js'
import { freshSqliteUrl } from '../../../../test/helpers/stores.js'
import { usageRecord } from '../../../../test/helpers/store-fixture.js'

/** Sustained ledger writes with no pause between groups: the WAL must still start over, or it grows without bound. */
describe('the SQLite WAL under sustained writes', () => {
  it('starts over near its limit instead of growing for as long as the load lasts', async () => {
    const url = freshSqliteUrl()
    const walPath = `${url.slice('sqlite:'.length)}-wal`
    const limit = 256 * 1024
    const store = await openStore(url, Date.now, { walLimitBytes: limit })
    try {
      const users: number[] = []
      for (let i = 0; i < 8; i++) {
        const id = (await store.accounts.ensure(`0x${(0xa100 + i).toString(16).padStart(40, '0')}`, 'user', Date.now()))
          .account.id
        await store.accounts.deposit({ id, amount: 10n ** 12n, ref: `dep_${i}`, now: Date.now() })
        await store.accounts.approve(id, 10n ** 12n)
        users.push(id)
      }
      const payee = (await store.accounts.ensure('0x00000000000000000000000000000000000000b2', 'provider', Date.now()))
        .account.id
      const fees = (await store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!.id
      const sizes: number[] = []
      const sampler = setInterval(() => sizes.push(statSync(walPath).size), 20)
      let n = 0
      let written = 0
      const end = performance.now() + 1500
      await Promise.all(
        users.map(async (accountId) => {
          while (performance.now() < end) {
            const requestId = `req_wal_${n++}`
            const now = Date.now()
            const held = await store.ledger.hold({
              requestId,
              accountId,
              keyId: 'k',
              model: 'm',
              amount: 100n,
              owner: 'test',
              now,
              expiresAt: now + 60_000,
            })
            expect(held.ok).toBe(true)
            await store.ledger.capture({
              requestId,
              cost: 30n,
              payeeId: payee,
              fee: 1n,
              feeAccountId: fees,
              now,
              usage: usageRecord(requestId, accountId, 30n, { createdAt: now }),
            })
            written++
          }
        }),
      )
      clearInterval(sampler)
      // Enough writes to pass the limit many times over; the file came back down each time instead of keeping them all.
      const restarts = sizes.filter((s, i) => i > 0 && s < sizes[i - 1]!).length
      const grown = sizes.reduce(
        (sum, s, i) => sum + (i > 0 && s > sizes[i - 1]! ? s - sizes[i - 1]! : 0),
        sizes[0] ?? 0,
      )
      expect(written).toBeGreaterThan(300)
      expect(Math.max(...sizes)).toBeGreaterThan(limit)
      expect(restarts).toBeGreaterThanOrEqual(2)
      expect(Math.max(...sizes)).toBeLessThan(grown / 2)
      const audit = await store.ledger.audit()
      expect(audit.unbalanced).toEqual([])
      expect(audit.inconsistent).toEqual([])
    } finally {
      await store.close()
    }
  })
})

describe('closing the SQLite store', () => {
  it('commits the ledger operations already queued before it closes', async () => {
    const store = await openStore(freshSqliteUrl())
    const id = (await store.accounts.ensure('0x000000000000000000000000000000000000a1a1', 'user', Date.now())).account
      .id
    await store.accounts.deposit({ id, amount: 1_000_000n, ref: 'dep_close', now: Date.now() })
    await store.accounts.approve(id, 1_000_000n)
    const now = Date.now()
    const holds = Array.from({ length: 20 }, (_, i) =>
      store.ledger.hold({
        requestId: `req_close_${i}`,
        accountId: id,
        keyId: 'k',
        model: 'm',
        amount: 10n,
        owner: 'test',
        now,
        expiresAt: now + 60_000,
      }),
    )
    await store.close()
    const results = await Promise.allSettled(holds)
    expect(results.every((r) => r.status === 'fulfilled' && r.value.ok)).toBe(true)
  })
})
