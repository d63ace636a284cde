import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../src/store/open.js'
import type { Store } from '../src/store/store.js'
import { depositTo, issueKey, openAccount } from '../src/accounts/operations.js'
import { formatUsdc } from '../src/money/usdc.js'
import { chat, marketConfig, addressOf, startSims, type Market } from './helpers/market.js'
import { checkInvariants, maxCostFor } from './helpers/money.js'
import { daemon, type Daemon, LISTENING, listeningLine } from './helpers/cli.js'
import { dropSchema, freshStoreUrl, postgresReachable, type StoreKind } from './helpers/stores.js'

type Sims = Market['sims']

const ask = chat

const N = 6
const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'spend the key' }], max_tokens: 40 }

/** A key's spend limit, oversubscribed from two gateway processes on one store: what they admit together. */
describe.each<StoreKind>(['sqlite', 'postgres'])('a key spend limit across two gateway processes on %s', (kind) => {
  let sims: Sims
  let storeUrl: string
  let store: Store
  const gws: { d: Daemon; url: string }[] = []
  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    sims = await startSims()
    storeUrl = freshStoreUrl(kind)
    store = await openStore(storeUrl)
    const file = join(mkdtempSync(join(tmpdir(), 'svc-spend-')), 'config.json')
    const tuning = { firstByteTimeoutMs: 20_000, replyTimeoutMs: 20_000, keyCacheMs: 0 }
    writeFileSync(file, JSON.stringify(marketConfig(sims, storeUrl, tuning)))
    for (let i = 0; i < 2; i++) {
      const d = await daemon(['serve', '--config', file], LISTENING)
      gws.push({ d, url: listeningLine(d.output()).base_url })
    }
  })
  afterAll(async () => {
    for (const g of gws) await g.d.stop()
    await store?.close()
    if (sims) await Promise.all(Object.values(sims).map((s) => s.close()))
    if (kind === 'postgres' && storeUrl) await dropSchema(storeUrl)
  })

  it(`admits ${N} of ${4 * N} requests under a limit of ${N} holds, charges at most the limit, and counts it`, async () => {
    const max = maxCostFor(marketConfig(sims, storeUrl, {}), body)
    const limit = max * BigInt(N)
    const funds = limit * 100n
    const { account } = await openAccount(store, addressOf(0x35), Date.now())
    await depositTo(store, account.id, funds, Date.now())
    await store.accounts.approve(account.id, funds)
    const spend = { limit, reset: 'none' as const }
    const issued = await issueKey({
      now: Date.now(),
      store,
      accountId: account.id,
      name: 'ci',
      limits: { rpm: null, tpm: null, spend },
    })
    // Admitted requests wait at the provider until all are decided: no capture frees room under the limit early.
    for (const s of [sims.atlasCheap, sims.atlasDear]) s.setFault({ kind: 'stall' })
    const waiting = () => sims.atlasCheap.stats.active + sims.atlasDear.stats.active
    let refused = 0
    const send = (i: number) =>
      ask(gws[i % 2]!.url, issued.key, body).then((r) => {
        if (r.status === 402) refused++
        return r
      })
    // One request per process first, so that both admit from the one store.
    const pending = [send(0), send(1)]
    await expect.poll(waiting, { timeout: 20_000 }).toBe(2)
    pending.push(...Array.from({ length: 4 * N - 2 }, (_, i) => send(i)))
    await expect.poll(() => refused + waiting(), { timeout: 20_000 }).toBe(4 * N)
    expect(waiting()).toBe(N)
    for (const s of [sims.atlasCheap, sims.atlasDear]) s.setFault({ kind: 'none' })
    const responses = await Promise.all(pending)
    const bodies = await Promise.all(responses.map((r) => r.json()))
    expect(responses.filter((r) => r.status === 200)).toHaveLength(N)
    expect(new Set(responses.filter((r) => r.status === 200).map((r) => r.url)).size).toBe(2)
    for (const b of bodies.filter((x) => x.error)) {
      expect(b.error.code).toBe('insufficient_quota')
      expect(b.error.message).toContain(`spend limit of ${formatUsdc(limit)} USDC in all`)
      expect(b.error.message).toMatch(/does not reset/)
    }
    const { captured } = await checkInvariants(store, account.id, funds)
    expect(captured).toBeGreaterThan(0n)
    expect(captured).toBeLessThanOrEqual(limit)
    // The key's counters hold what its requests were charged, and nothing held once all closed.
    const [k] = await store.keys.list(account.id)
    expect(k!.period).toMatchObject({ spent: captured, held: 0n })
    // The refused were not counted: the key still has what the limit leaves.
    const more = await ask(gws[0]!.url, issued.key, body)
    expect(more.status).toBe(limit - captured >= max ? 200 : 402)
  }, 60_000)
})
