import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, P, startMarket, type Market } from '../helpers/market.js'
import { daemon, svc } from '../helpers/cli.js'
import { ENGINE_INSTALLED, modelFile, SENTENCE } from '../helpers/engine.js'

// `svc provider serve`: a provider node in one command, joining a running marketplace with its wallet.

describe.skipIf(!ENGINE_INSTALLED)('svc provider serve', () => {
  let m: Market
  let keyFile: string
  beforeAll(async () => {
    m = await startMarket({ tuning: { firstByteTimeoutMs: 10_000, replyTimeoutMs: 10_000 } })
    keyFile = join(mkdtempSync(join(tmpdir(), 'svc-serve-')), 'wallet.key')
  }, 60_000)
  afterAll(() => m?.close())

  const body = { model: 'svc/wren@1', messages: [{ role: 'user', content: 'Where does the river go?' }] }
  const serveArgs = (key: string) => [
    'provider',
    'serve',
    '--model-file',
    modelFile(),
    '--name',
    'bigram',
    '--marketplace',
    m.url,
    '--wallet-key-file',
    key,
    '--offer',
    'svc/wren@1',
    // Cheaper than the market's own wren provider: routed to first.
    '--input-price',
    '0.01',
    '--output-price',
    '0.02',
  ]

  it('joins within 10 s and serves; SIGTERM withdraws it and traffic moves with no failed request', async () => {
    const key = generatePrivateKey()
    const address = privateKeyToAccount(key).address
    writeFileSync(keyFile, key)
    const started = Date.now()
    const node = await daemon([...serveArgs(keyFile), '--json'], /endpoint_id/)
    try {
      const joined = JSON.parse(node.output().trim().split('\n').at(-1)!)
      expect(joined).toMatchObject({ model: 'svc/wren@1', upstream_model: 'bigram', endpoint_id: expect.any(String) })
      // The gateway routes to an offer once it has read it: within a few seconds.
      let served: { choices: { message: { content: string } }[]; svc: { provider: string } } | undefined
      while (Date.now() - started < 10_000) {
        const res = await chat(m.url, m.key, body)
        expect(res.status).toBe(200)
        const json = (await res.json()) as typeof served
        if (json!.svc.provider === address) {
          served = json
          break
        }
        await new Promise((r) => setTimeout(r, 100))
      }
      expect(served, 'served by the node within 10 s of its start').toBeDefined()
      expect(served!.choices[0]!.message.content).toBe(SENTENCE)

      // Traffic while the node leaves: every request served, by the node and then by the market's own provider.
      const statuses: number[] = []
      const providers = new Set<string>()
      let on = true
      const traffic = (async () => {
        while (on) {
          const res = await chat(m.url, m.key, body)
          statuses.push(res.status)
          providers.add(((await res.json()) as { svc?: { provider: string } }).svc?.provider ?? 'none')
        }
      })()
      await new Promise((r) => setTimeout(r, 300))
      await node.stop('SIGTERM')
      expect(node.child.exitCode).toBe(0)
      // Its endpoint withdrawn in the store, by the node itself, before its engine stopped.
      const rows = await m.store.db
        .selectFrom('provider_endpoints')
        .select('status')
        .where('base_url', '=', joined.base_url)
        .execute()
      expect(rows).toEqual([{ status: 'withdrawn' }])
      await new Promise((r) => setTimeout(r, 3000))
      on = false
      await traffic
      expect(statuses.length).toBeGreaterThan(5)
      expect(statuses.filter((s) => s !== 200)).toEqual([])
      expect(providers).toContain(P.wren)
      const res = await chat(m.url, m.key, body)
      expect(((await res.json()) as { svc: { provider: string } }).svc.provider).toBe(P.wren)
    } finally {
      await node.stop('SIGKILL')
    }
  }, 60_000)

  it('refuses a bad key file, or both or neither of --model-file and --upstream, in one line', async () => {
    writeFileSync(keyFile, 'not a key')
    const bad = await svc(serveArgs(keyFile))
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/^error: .* must hold one 0x-prefixed private key\n$/)
    writeFileSync(keyFile, generatePrivateKey())
    const both = await svc([...serveArgs(keyFile), '--upstream', 'http://127.0.0.1:1/v1'])
    expect(both.stderr).toBe('error: give one of --model-file and --upstream\n')
  })
})
