import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { chat, marketPerTest, sseEvents } from './helpers/market.js'
import { parseUsdc } from '../src/money/usdc.js'

const market = marketPerTest()
/** Budgets far beyond the test, so a stalled request waits for the test and does not fail over under load. */
const patient = { tuning: { firstByteTimeoutMs: 60_000, replyTimeoutMs: 60_000 } }

describe('a hold released by a sweep while its request is served', () => {
  it.each([false, true])('reports the cost that was captured, not the price (stream %s)', async (stream) => {
    const mk = await market(patient)
    mk.sims.atlasCheap.setFault({ kind: 'stall' })
    const pending = chat(mk.url, mk.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 20,
      stream,
    })
    await expect.poll(() => mk.sims.atlasCheap.stats.active).toBe(1)
    // Another gateway took this one for dead (a stale heartbeat) and released its holds.
    expect(await mk.store.ledger.releaseOwnedBy([mk.server.gateway.lifecycle.id], Date.now())).toBe(1)
    mk.sims.atlasCheap.setFault({ kind: 'none' })
    const res = await pending
    expect(res.status).toBe(200)
    const svc = stream ? JSON.parse((await sseEvents(res)).at(-2)!).svc : (await res.json()).svc
    // Recorded as abandoned (its hold was released), with what was served, and charged nothing.
    const record = (await mk.store.usage.get(mk.accountId, svc.request_id))!
    expect(record).toMatchObject({ outcome: 'abandoned', cost: 0n })
    expect(record.completionTokens).toBeGreaterThan(0)
    expect(parseUsdc(svc.cost_usdc)).toBe(record.cost)
    expect((await mk.store.accounts.byId(mk.accountId))!).toMatchObject({ balance: 10_000_000n, held: 0n })
    const audit = await mk.store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
  })
})

describe('the lease of a hold whose request is in flight', () => {
  it('is extended by the heartbeat for as long as the request is served', async () => {
    const mk = await market(patient)
    mk.sims.atlasCheap.setFault({ kind: 'stall' })
    const pending = chat(mk.url, mk.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 20,
    })
    await expect.poll(() => mk.sims.atlasCheap.stats.active).toBe(1)
    const life = mk.server.gateway.lifecycle
    const [requestId] = life.servingIds()
    const lease = () => mk.store.ledger.leaseOf(requestId!)!
    const before = lease()
    expect(life.inFlight).toBe(1)
    await sleep(5)
    await life.heartbeat()
    expect(lease()).toBeGreaterThan(before)
    mk.sims.atlasCheap.setFault({ kind: 'none' })
    expect((await pending).status).toBe(200)
    expect(await mk.store.ledger.openHolds()).toBe(0)
    expect(life.inFlight).toBe(0)
  })
})
