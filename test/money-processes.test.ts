import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../src/store/open.js'
import type { Store } from '../src/store/store.js'
import { marketConfig, addressOf, startSims, type Market } from './helpers/market.js'
import { checkInvariants, fundedKey, maxCostFor } from './helpers/money.js'
import { daemon, type Daemon, LISTENING, listeningLine } from './helpers/cli.js'
import { dropSchema, freshStoreUrl, postgresReachable, type StoreKind } from './helpers/stores.js'

type Sims = Market['sims']

function writeConfig(sims: Sims, storeUrl: string, tuning: Record<string, number>): string {
  const file = join(mkdtempSync(join(tmpdir(), 'svc-proc-')), 'config.json')
  writeFileSync(file, JSON.stringify(marketConfig(sims, storeUrl, tuning)))
  return file
}

async function gateway(configFile: string): Promise<{ d: Daemon; url: string }> {
  const d = await daemon(['serve', '--config', configFile], LISTENING)
  return { d, url: listeningLine(d.output()).base_url }
}

const ask = (url: string, key: string, body: unknown) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })

const N = 8
const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'spend it all' }], max_tokens: 40 }

describe.each<[StoreKind, number]>([
  ['sqlite', 1],
  ['postgres', 2],
  ['postgres', 3],
])('concurrent admission on %s through %i gateway process(es)', (kind, processes) => {
  let sims: Sims
  let storeUrl: string
  let store: Store
  const gws: { d: Daemon; url: string }[] = []
  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    sims = await startSims()
    storeUrl = freshStoreUrl(kind)
    store = await openStore(storeUrl)
    // A reply budget (non-streaming) and a first-byte budget (streaming) beyond the test: the admitted requests stall
    // at the provider until all 4N are decided, which may take longer than the shared test tuning's 500 ms under load.
    const file = writeConfig(sims, storeUrl, { firstByteTimeoutMs: 20_000, replyTimeoutMs: 20_000, keyCacheMs: 0 })
    for (let i = 0; i < processes; i++) gws.push(await gateway(file))
  })
  afterAll(async () => {
    for (const g of gws) await g.d.stop()
    await store?.close()
    if (sims) await Promise.all(Object.values(sims).map((s) => s.close()))
    if (kind === 'postgres' && storeUrl) await dropSchema(storeUrl)
  })

  it(`admits at most ${N} of ${4 * N} requests funded for ${N}, never overspends, and the books balance`, async () => {
    const config = marketConfig(sims, storeUrl, {})
    const max = maxCostFor(config, body)
    const funds = max * BigInt(N)
    const { accountId, key } = await fundedKey(store, addressOf(0x31), funds)
    // Admitted requests wait at the provider until every one of the 4N is decided, so no capture frees room early.
    for (const s of [sims.atlasCheap, sims.atlasDear]) s.setFault({ kind: 'stall' })
    let refused = 0
    const send = (i: number) =>
      ask(gws[i % gws.length]!.url, key, body).then((r) => {
        if (r.status === 402) refused++
        return r
      })
    const waiting = () => sims.atlasCheap.stats.active + sims.atlasDear.stats.active
    // One request per process first, admitted before the rest are sent: otherwise one process could take every
    // unit before the other's first request arrived, and the test could not show that both admit from one store.
    const pending = gws.map((_, i) => send(i))
    await expect.poll(waiting, { timeout: 20_000 }).toBe(gws.length)
    pending.push(...Array.from({ length: 4 * N - gws.length }, (_, i) => send(i)))
    await expect.poll(() => refused + waiting(), { timeout: 20_000 }).toBe(4 * N)
    expect(waiting()).toBe(N)
    for (const s of [sims.atlasCheap, sims.atlasDear]) s.setFault({ kind: 'none' })
    const responses = await Promise.all(pending)
    const statuses = responses.map((r) => r.status)
    const bodies = await Promise.all(responses.map((r) => r.json()))
    expect(statuses.filter((s) => s === 200)).toHaveLength(N)
    expect(statuses.filter((s) => s === 402)).toHaveLength(3 * N)
    for (const b of bodies.filter((x) => x.error)) expect(b.error.code).toBe('insufficient_quota')
    if (processes > 1) {
      // Both processes admitted requests: the hold is atomic in the shared store, not per process.
      const served = new Set(responses.filter((r) => r.status === 200).map((r) => r.url))
      expect(served.size).toBe(processes)
    }
    const account = (await store.accounts.byId(accountId))!
    expect(account.held).toBe(0n)
    expect(account.balance).toBeGreaterThanOrEqual(0n)
    const { captured } = await checkInvariants(store, accountId, funds)
    const charged = bodies
      .filter((b) => b.svc)
      .reduce((s, b) => s + BigInt(Math.round(Number(b.svc.cost_usdc) * 1e6)), 0n)
    expect(captured).toBe(charged)
    expect(await store.ledger.openHolds()).toBe(0)
  }, 60_000)
})

describe.each<StoreKind>(['sqlite', 'postgres'])('kill -9 in the middle of streams on %s', (kind) => {
  it('releases unfinished holds on restart, charges nothing for them, and charges completed requests once', async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    const sims = await startSims({ chunkDelayMs: 100, replyTokens: 60 })
    const storeUrl = freshStoreUrl(kind)
    const store = await openStore(storeUrl)
    const file = writeConfig(sims, storeUrl, { firstByteTimeoutMs: 5_000, replyTimeoutMs: 5_000, keyCacheMs: 0 })
    let gw = await gateway(file)
    try {
      const funds = 10_000_000n
      const { accountId, key } = await fundedKey(store, addressOf(0x32), funds)
      const done = await Promise.all(
        [1, 2, 3].map(() => ask(gw.url, key, { ...body, max_tokens: 3 }).then((r) => r.json())),
      )
      expect(done.every((d) => d.svc)).toBe(true)
      const streams = await Promise.all(
        [1, 2, 3, 4].map(async () => {
          const res = await ask(gw.url, key, { ...body, stream: true, max_tokens: 60 })
          const reader = res.body!.getReader()
          let seen = ''
          while (!seen.includes('"content":"T') && !seen.match(/"content":"[a-z ]/))
            seen += new TextDecoder().decode((await reader.read()).value)
          return { id: res.headers.get('x-request-id')!, reader }
        }),
      )
      expect((await store.accounts.byId(accountId))!.held).toBeGreaterThan(0n)
      // The instance's heartbeat has written the requests it serves: a death now cuts them off visibly.
      await expect
        .poll(async () => (await store.db.selectFrom('requests_in_flight').select('request_id').execute()).length)
        .toBe(streams.length)
      await gw.d.stop('SIGKILL')
      for (const s of streams) await s.reader.cancel().catch(() => {})
      gw = await gateway(file)
      // The new instance releases the dead one's holds as it starts.
      const account = (await store.accounts.byId(accountId))!
      expect(account.held).toBe(0n)
      expect(await store.ledger.openHolds()).toBe(0)
      // The dead instance's requests are recorded as cut off, charged nothing, and nothing is posted for them: their
      // holds were only counted (docs/ledger-written-once.md), and the count is what the restart returned.
      for (const s of streams) {
        expect(await store.usage.get(accountId, s.id)).toMatchObject({ outcome: 'cut_off', cost: 0n })
      }
      const posted = await store.db
        .selectFrom('postings')
        .select('ref')
        .where(
          'ref',
          'in',
          streams.map((s) => s.id),
        )
        .execute()
      expect(posted).toEqual([])
      const completed = (await store.usage.list(accountId, { limit: 100 })).filter((u) => u.outcome === 'completed')
      expect(completed.map((u) => u.requestId).sort()).toEqual(done.map((d) => d.svc.request_id).sort())
      const { captured } = await checkInvariants(store, accountId, funds)
      expect(captured).toBe(done.reduce((s, d) => s + BigInt(Math.round(Number(d.svc.cost_usdc) * 1e6)), 0n))
      // And the restarted gateway serves.
      expect((await ask(gw.url, key, { ...body, max_tokens: 2 })).status).toBe(200)
    } finally {
      await gw.d.stop()
      await store.close()
      await Promise.all(Object.values(sims).map((s) => s.close()))
      if (kind === 'postgres') await dropSchema(storeUrl)
    }
  }, 60_000)
})
