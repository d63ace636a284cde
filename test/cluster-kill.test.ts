import { describe, expect, it } from 'vitest'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../src/store/open.js'
import { depositTo, issueKey, openAccount } from '../src/accounts/operations.js'
import { chat, marketConfig, addressOf, startSims } from './helpers/market.js'
import { checkInvariants } from './helpers/money.js'
import { daemon, type Daemon, LISTENING, listeningLine } from './helpers/cli.js'
import { dropSchema, freshStoreUrl, postgresReachable } from './helpers/stores.js'

const ask = chat

const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'tell a long story' }], max_tokens: 60 }

/**
 * Three gateway processes on one Postgres, on one host; one dies (kill -9) in the middle of streams. A live one
 * releases its holds at its next heartbeat (2 s: on the same host a dead process id is seen at once; README "Holds and
 * leases"), the others serve on, and no completed request loses its charge.
 */
describe('kill -9 of one of three gateways on one Postgres', () => {
  it("a live gateway releases the dead one's holds within the documented time; completed charges stay", async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    const sims = await startSims({ chunkDelayMs: 100, replyTokens: 60 })
    const storeUrl = freshStoreUrl('postgres')
    const store = await openStore(storeUrl)
    const file = join(mkdtempSync(join(tmpdir(), 'svc-kill-')), 'config.json')
    const tuning = { firstByteTimeoutMs: 5_000, replyTimeoutMs: 30_000, keyCacheMs: 0 }
    writeFileSync(file, JSON.stringify(marketConfig(sims, storeUrl, tuning)))
    const gws: { d: Daemon; url: string }[] = []
    try {
      for (let i = 0; i < 3; i++) {
        const d = await daemon(['serve', '--config', file], LISTENING)
        gws.push({ d, url: listeningLine(d.output()).base_url })
      }
      const funds = 10_000_000n
      const { account } = await openAccount(store, addressOf(0x36), Date.now())
      await depositTo(store, account.id, funds, Date.now())
      await store.accounts.approve(account.id, funds)
      const { key } = await issueKey({ now: Date.now(), store, accountId: account.id, name: 'kill' })
      const done = await Promise.all(gws.map((g) => ask(g.url, key, { ...body, max_tokens: 3 }).then((r) => r.json())))
      expect(done.every((d) => d.svc)).toBe(true)
      const [victim, ...living] = gws as [(typeof gws)[0], ...typeof gws]
      const streams = await Promise.all(
        [1, 2, 3].map(async () => {
          const res = await ask(victim.url, key, { ...body, stream: true })
          const reader = res.body!.getReader()
          let seen = ''
          while (!/"content":"[A-Za-z ]/.test(seen)) seen += new TextDecoder().decode((await reader.read()).value)
          return { id: res.headers.get('x-request-id')!, reader }
        }),
      )
      await expect
        .poll(async () => (await store.db.selectFrom('requests_in_flight').select('request_id').execute()).length)
        .toBe(streams.length)
      const held = (await store.accounts.byId(account.id))!.held
      expect(held).toBeGreaterThan(0n)
      await victim.d.stop('SIGKILL')
      const diedAt = Date.now()
      for (const s of streams) await s.reader.cancel().catch(() => {})
      // The living serve meanwhile, and are charged as usual.
      const during = await Promise.all(living.map((g) => ask(g.url, key, { ...body, max_tokens: 3 })))
      expect(during.map((r) => r.status)).toEqual([200, 200])
      done.push(...(await Promise.all(during.map((r) => r.json()))))
      // Released by a live gateway at its next heartbeat (2 s; a loaded machine's timers may run late).
      await expect.poll(async () => (await store.accounts.byId(account.id))!.held, { timeout: 10_000 }).toBe(0n)
      expect(Date.now() - diedAt).toBeLessThan(6_000)
      for (const s of streams)
        await expect
          .poll(async () => (await store.usage.get(account.id, s.id))?.outcome, { timeout: 5_000 })
          .toBe('cut_off')
      const { captured } = await checkInvariants(store, account.id, funds)
      expect(captured).toBe(done.reduce((s, d) => s + BigInt(Math.round(Number(d.svc.cost_usdc) * 1e6)), 0n))
      expect(await store.ledger.openHolds()).toBe(0)
    } finally {
      for (const g of gws) await g.d.stop().catch(() => {})
      await store.close()
      await Promise.all(Object.values(sims).map((s) => s.close()))
      await dropSchema(storeUrl)
    }
  }, 60_000)
})
