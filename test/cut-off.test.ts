import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { SimulatedProvider } from '../src/providers/simulated/server.js'
import { openStore } from '../src/store/open.js'
import { depositTo, issueKey, openAccount } from '../src/accounts/operations.js'
import { addressOf, marketConfig, type Market } from './helpers/market.js'
import { checkInvariants } from './helpers/money.js'
import { daemon, LISTENING, listeningLine } from './helpers/cli.js'
import { freshStoreUrl } from './helpers/stores.js'

type Sims = Market['sims']

async function startSims(): Promise<Sims> {
  const s = () => SimulatedProvider.start({ chunkDelayMs: 100, replyTokens: 60 })
  const vendor = await SimulatedProvider.start({ chunkDelayMs: 100, apiKey: 'vendor-key' })
  return { atlasCheap: await s(), atlasDear: await s(), tern: await s(), wren: await s(), quill: await s(), vendor }
}

async function gateway(configFile: string) {
  const d = await daemon(['serve', '--config', configFile], LISTENING)
  return { d, url: listeningLine(d.output()).base_url as string }
}

describe('a request cut off by kill -9 of its gateway', () => {
  it('gets a usage record once its hold is released; its Idempotency-Key retry runs, charged once', async () => {
    const sims = await startSims()
    const storeUrl = freshStoreUrl('sqlite')
    const store = await openStore(storeUrl)
    const file = join(mkdtempSync(join(tmpdir(), 'svc-cut-')), 'config.json')
    const tuning = { firstByteTimeoutMs: 5_000, replyTimeoutMs: 10_000, keyCacheMs: 0 }
    writeFileSync(file, JSON.stringify(marketConfig(sims, storeUrl, tuning)))
    let gw = await gateway(file)
    try {
      const funds = 10_000_000n
      const { account } = await openAccount(store, addressOf(0x41), Date.now())
      await depositTo(store, account.id, funds, Date.now())
      await store.accounts.approve(account.id, funds)
      const { key } = await issueKey({ now: Date.now(), store, accountId: account.id, name: 'cut' })
      const send = (url: string) =>
        fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'cut-1' },
          body: JSON.stringify({
            model: 'svc/atlas@1',
            messages: [{ role: 'user', content: 'a long one' }],
            stream: true,
            max_tokens: 60,
          }),
        })
      const first = await send(gw.url)
      const reader = first.body!.getReader()
      await reader.read()
      const id = first.headers.get('x-request-id')!
      await expect
        .poll(async () => (await store.db.selectFrom('requests_in_flight').select('request_id').execute()).length)
        .toBe(1)
      await gw.d.stop('SIGKILL')
      await reader.cancel().catch(() => {})
      gw = await gateway(file)
      const record = await fetch(`${gw.url}/v1/usage/${id}`, { headers: { authorization: `Bearer ${key}` } })
      expect(record.status).toBe(200)
      expect(await record.json()).toMatchObject({ request_id: id, outcome: 'cut_off', cost_usdc: '0.000000' })
      // Nothing was charged for it: the retry under the same key runs, and is the one charge.
      const retry = await send(gw.url)
      expect(retry.status).toBe(200)
      const text = await retry.text()
      expect(text).toContain('"svc"')
      const completed = (await store.usage.list(account.id, { limit: 10 })).filter((u) => u.outcome === 'completed')
      expect(completed).toHaveLength(1)
      const { captured } = await checkInvariants(store, account.id, funds)
      expect(captured).toBe(completed[0]!.cost)
    } finally {
      await gw.d.stop()
      await store.close()
      await Promise.all(Object.values(sims).map((s) => s.close()))
    }
  }, 60_000)
})
