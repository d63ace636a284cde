import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { SimulatedProvider } from '../src/providers/simulated/server.js'
import { OpenAICompatibleProvider } from '../src/providers/openai-compatible.js'
import { PUBLIC_ONLY } from '../src/providers/address-policy.js'
import { Cancel } from '../src/providers/cancel.js'
import { loadSecretBox, newSecretsKey } from '../src/store/secret-box.js'
import { openStore } from '../src/store/open.js'
import { chat, startMarket, type Market } from './helpers/market.js'
import { signIn, type PortalClient } from './helpers/portal.js'

const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }

/** Endpoints a stranger's wallet registers: where the gateway will call, what it echoes back, how their keys rest. */
describe("providers' endpoints: addresses, probes and API keys at rest", () => {
  let m: Market
  let sim: SimulatedProvider
  let provider: PortalClient
  let tattler: Server
  let tattlerUrl: string
  beforeAll(async () => {
    // Endpoints of wallets may be public addresses only; the config's own providers are on loopback all the same.
    m = await startMarket({
      edit: (c) => void ((c.providerEndpoints = { allowAddresses: [] }), (c.metrics = { port: 0 })),
    })
    sim = await SimulatedProvider.start({ apiKey: 'sk-portal-secret' })
    provider = await signIn(m.url, privateKeyToAccount(generatePrivateKey()))
    // An upstream that answers everything with a long body holding what it should never show.
    tattler = createServer((_req, res) =>
      res
        .writeHead(401, { 'content-type': 'application/json' })
        .end(`{"error":"${'internal\u0007secret '.repeat(60)}"}`),
    )
    await new Promise<void>((r) => tattler.listen(0, '127.0.0.1', r))
    tattlerUrl = `http://127.0.0.1:${(tattler.address() as AddressInfo).port}/v1`
  })
  afterAll(async () => {
    await m?.close()
    await sim?.close()
    await new Promise((r) => tattler?.close(r))
  })

  const register = (base_url: string, api_key?: string) =>
    provider.call('POST', '/provider/endpoints', {
      base_url,
      bundle: 'vllm',
      profile: 'sim',
      ...(api_key ? { api_key } : {}),
    })

  it('refuses endpoints on loopback, private, link-local and reserved addresses, by name too', async () => {
    const metrics = new URL(m.server.metricsUrl!)
    for (const [url, kind] of [
      ['http://169.254.169.254/latest/v1', 'link-local'],
      ['http://10.1.2.3:8000/v1', 'private'],
      ['http://192.168.0.10/v1', 'private'],
      [`http://127.0.0.1:${metrics.port}/v1`, 'loopback'],
      ['http://[::1]:9000/v1', 'loopback'],
      ['http://[::ffff:127.0.0.1]:9000/v1', 'loopback'],
      ['http://[fd00::1]/v1', 'private'],
      ['http://0.0.0.0:9000/v1', 'reserved'],
      [`http://localhost:${metrics.port}/v1`, 'loopback'],
    ] as const) {
      const res = await register(url)
      expect(res.status, url).toBe(400)
      const e = (await res.json()).error
      expect(e.code).toBe('feature_not_supported')
      expect(e.message).toContain(`is a ${kind} address, which this marketplace does not call`)
    }
    expect((await (await provider.call('GET', '/provider/endpoints')).json()).data).toEqual([])
  })

  it('connects to no refused address, whatever the name resolved to when it was registered', async () => {
    // `localhost` resolves to loopback at connection time: refused there, as a name that moved to it later would be.
    const hits = sim.stats.requests
    const upstream = new OpenAICompatibleProvider(
      sim.url.replace('127.0.0.1', 'localhost'),
      'sk-portal-secret',
      { firstByteTimeoutMs: 2_000, replyTimeoutMs: 2_000, idleTimeoutMs: 2_000 },
      { addresses: PUBLIC_ONLY },
    )
    try {
      const events = []
      for await (const batch of upstream.stream(
        'atlas',
        { bodyJson: JSON.stringify({ messages: body.messages }), stream: false },
        new Cancel(),
      ))
        events.push(...batch)
      expect(events).toEqual([
        {
          type: 'failure',
          failure: expect.objectContaining({
            kind: 'unavailable',
            unreached: true,
            detail: expect.stringMatching(/is a loopback address, which this marketplace does not call/),
          }),
        },
      ])
      expect(sim.stats.requests).toBe(hits)
    } finally {
      await upstream.close()
    }
  })

  it("seals an endpoint's API key in the store, opens it only with the key, and reseals it after a rotation", async () => {
    // A market whose wallets may use loopback endpoints (this machine's), on a store the test reads raw.
    const dir = mkdtempSync(join(tmpdir(), 'svc-secrets-'))
    const oldKey = newSecretsKey()
    const keyFile = join(dir, 'secrets.key')
    writeFileSync(keyFile, oldKey)
    const local = await startMarket({ edit: (c) => void (c.secrets = { keyFile }) })
    try {
      const owner = await signIn(local.url, privateKeyToAccount(generatePrivateKey()))
      const added = await owner.call('POST', '/provider/endpoints', {
        base_url: sim.url,
        api_key: 'sk-portal-secret',
        bundle: 'vllm',
        profile: 'sim',
      })
      expect(added.status).toBe(201)
      const { id } = await added.json()
      const offer = { model: 'svc/atlas@1', upstream_model: 'atlas', input_price_per_mtok: '0.01' }
      const set = await owner.call('POST', `/provider/endpoints/${id}/offers`, {
        ...offer,
        output_price_per_mtok: '0.04',
      })
      expect(set.status, await set.clone().text()).toBe(200)
      const row = await local.store.db
        .selectFrom('provider_endpoints')
        .select('api_key')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
      expect(row.api_key).toMatch(/^sealed:v1:/)
      expect(row.api_key).not.toContain('sk-portal-secret')
      // The gateway opens it to call the endpoint, which refuses any other key: the cheap offer serves.
      await local.server.gateway.readOffers()
      const res = await chat(local.url, local.key, body)
      expect(res.status).toBe(200)
      expect((await res.json()).svc.provider).toBe(owner.address)

      // A copy of the store opened without the key: the offer is left out, the key shown nowhere.
      const copy = await openStore(local.config.store)
      try {
        const why: string[] = []
        expect(await copy.providers.liveOffers((e) => why.push(e.message))).toEqual([])
        expect(why).toEqual([`the API key of endpoint ${id} is sealed, and no secrets key is set`])
        // Rotation: the new key first, the old after it; a gateway's start (or svc provider reseal) seals again.
        const newKey = newSecretsKey()
        writeFileSync(keyFile, `${newKey}\n${oldKey}\n`)
        copy.providers.keys.use(loadSecretBox({ secrets: { keyFile } }))
        expect(await copy.providers.keys.reseal()).toEqual({ sealed: 1, unreadable: [] })
        writeFileSync(keyFile, newKey)
        copy.providers.keys.use(loadSecretBox({ secrets: { keyFile } }))
        expect((await copy.providers.liveOffers()).find((o) => o.endpointId === id)?.apiKey).toBe('sk-portal-secret')
        // The old key alone no longer opens it.
        writeFileSync(keyFile, oldKey)
        copy.providers.keys.use(loadSecretBox({ secrets: { keyFile } }))
        const unread: string[] = []
        await copy.providers.liveOffers((e) => unread.push(e.message))
        expect(unread[0]).toMatch(/which the secrets key does not hold/)
      } finally {
        await copy.close()
      }
    } finally {
      await local.close()
    }
  })

  it('refuses to store an API key where no secrets key is set', async () => {
    const bare = await startMarket({ edit: (c) => void delete c.secrets })
    try {
      const owner = await signIn(bare.url, privateKeyToAccount(generatePrivateKey()))
      const res = await owner.call('POST', '/provider/endpoints', {
        base_url: sim.url,
        api_key: 'sk-portal-secret',
        bundle: 'vllm',
        profile: 'sim',
      })
      expect(res.status).toBe(400)
      expect((await res.json()).error.message).toMatch(
        /keeps no provider API keys: its operator has set no secrets key/,
      )
      expect(
        (await owner.call('POST', '/provider/endpoints', { base_url: sim.url, bundle: 'b', profile: 'p' })).status,
      ).toBe(201)
    } finally {
      await bare.close()
    }
  })

  it('tells a registrant why its endpoint failed its probe without echoing more than a short, plain part of the answer', async () => {
    const local = await startMarket()
    try {
      const owner = await signIn(local.url, privateKeyToAccount(generatePrivateKey()))
      const added = await owner.call('POST', '/provider/endpoints', { base_url: tattlerUrl, bundle: 'x', profile: 'y' })
      expect(added.status).toBe(201)
      const { id } = await added.json()
      const set = await owner.call('POST', `/provider/endpoints/${id}/offers`, {
        model: 'svc/atlas@1',
        input_price_per_mtok: '0.01',
        output_price_per_mtok: '0.04',
      })
      expect(set.status).toBe(400)
      const message: string = (await set.json()).error.message
      expect(message).toMatch(/failed its probe for svc\/atlas@1: .*upstream answered 401/)
      expect([...message].every((ch) => ch >= ' ' && ch !== '\u007f')).toBe(true)
      const reason = message.slice(message.indexOf('svc/atlas@1: ') + 'svc/atlas@1: '.length)
      expect(reason.length).toBeLessThanOrEqual(161)
      expect(message.split('secret').length).toBeLessThan(12)
    } finally {
      await local.close()
    }
  })
})
