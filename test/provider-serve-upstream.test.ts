import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SimulatedProvider } from '../src/providers/simulated/server.js'
import { chat, P, startMarket, type Market } from './helpers/market.js'
import { daemon, svc } from './helpers/cli.js'

// `svc provider serve --upstream`: a provider node in front of an engine already running (here a simulated vLLM),
// joining a marketplace with its wallet and leaving it on SIGTERM.

describe('svc provider serve --upstream', () => {
  let m: Market
  let engine: SimulatedProvider
  let keyFile: string
  beforeAll(async () => {
    m = await startMarket()
    engine = await SimulatedProvider.start({ dialect: 'vllm' })
    keyFile = join(mkdtempSync(join(tmpdir(), 'svc-serve-up-')), 'wallet.key')
  })
  afterAll(async () => {
    await m?.close()
    await engine?.close()
  })

  const body = { model: 'svc/wren@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }
  const args = (...extra: string[]) => [
    'provider',
    'serve',
    '--upstream',
    engine.url,
    '--name',
    'wren',
    '--marketplace',
    m.url,
    '--wallet-key-file',
    keyFile,
    '--offer',
    'svc/wren@1',
    '--input-price',
    '0.01',
    '--output-price',
    '0.02',
    ...extra,
  ]

  it('offers the engine it fronts, and withdraws it on SIGTERM', async () => {
    const key = generatePrivateKey()
    writeFileSync(keyFile, key)
    const address = privateKeyToAccount(key).address
    const node = await daemon([...args(), '--json'], /endpoint_id/)
    try {
      expect(JSON.parse(node.output().trim())).toMatchObject({ base_url: engine.url, upstream_model: 'wren' })
      const providerOf = async () => (await (await chat(m.url, m.key, body)).json()) as { svc: { provider: string } }
      let served = false
      for (let i = 0; i < 100 && !served; i++) {
        served = (await providerOf()).svc.provider === address
        if (!served) await new Promise((r) => setTimeout(r, 100))
      }
      expect(served).toBe(true)
      await node.stop('SIGTERM')
      expect(node.child.exitCode).toBe(0)
      // Its endpoint withdrawn in the store, by the node itself.
      const rows = await m.store.db.selectFrom('provider_endpoints').select(['base_url', 'status']).execute()
      expect(rows.filter((r) => r.base_url === engine.url)).toEqual([{ base_url: engine.url, status: 'withdrawn' }])
      // Withdrawn: the gateway routes to the market's own wren provider once it has read the change.
      let moved = false
      for (let i = 0; i < 100 && !moved; i++) {
        moved = (await providerOf()).svc.provider === P.wren
        if (!moved) await new Promise((r) => setTimeout(r, 100))
      }
      expect(moved).toBe(true)
    } finally {
      await node.stop('SIGKILL')
    }
  }, 30_000)

  it('says in one line why the marketplace refused it', async () => {
    writeFileSync(keyFile, generatePrivateKey())
    const unknown = await svc(args().map((a) => (a === 'svc/wren@1' ? 'svc/nothing@1' : a)))
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/^error: the marketplace refused the offer of svc\/nothing@1: 400 .*\n$/)
    const away = await svc(args().map((a) => (a === m.url ? 'http://127.0.0.1:1' : a)))
    expect(away.code).toBe(1)
    expect(away.stderr).toMatch(/^error: .*http:\/\/127\.0\.0\.1:1/)
  })
})
