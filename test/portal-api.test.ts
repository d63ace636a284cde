import { mkdtempSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { chat, startMarket, type Market } from './helpers/market.js'
import { signIn, type PortalClient } from './helpers/portal.js'
import { STORE_KINDS, postgresReachable } from './helpers/stores.js'
import { startServer } from '../src/server.js'
import { openAccount } from '../src/accounts/operations.js'
import { accountView } from '../src/cli/commands/accounts.js'

/**
 * What a signed-in wallet sees and changes through the portal API: keys, wallet, usage, provider earnings, the page.
 */
let m: Market
const user = privateKeyToAccount(generatePrivateKey())
const provider = privateKeyToAccount(generatePrivateKey())
let c: PortalClient

beforeAll(async () => {
  // The cheapest atlas provider is a wallet this test can sign in with.
  m = await startMarket({ edit: (config) => void (config.providers[0]!.address = provider.address) })
  c = await signIn(m.url, user)
})
afterAll(() => m?.close())

const json = async (res: Response, status = 200) => {
  expect(res.status).toBe(status)
  return res.json()
}

describe('keys', () => {
  it('counts a name in characters, not UTF-16 units', async () => {
    expect((await json(await c.call('POST', '/keys', { name: '🔑'.repeat(64) }), 201)).name).toBe('🔑'.repeat(64))
  })

  it('creates a key shown once, lists it by prefix and name only', async () => {
    const k = await json(await c.call('POST', '/keys', { name: '  ci runner ' }), 201)
    expect(k).toMatchObject({ object: 'api_key', name: 'ci runner', last_used: null, revoked: null })
    expect(k.prefix).toBe(`${k.api_key.slice(0, 15)}…`)
    const list = await json(await c.call('GET', '/keys'))
    const listed = list.data.find((x: { id: string }) => x.id === k.id)
    expect(listed).toEqual({
      object: 'api_key',
      id: k.id,
      prefix: k.prefix,
      name: 'ci runner',
      created: k.created,
      last_used: null,
      revoked: null,
      rpm: null,
      tpm: null,
      spend_limit: null,
      limit_reset: null,
      this_period: null,
    })
    expect(JSON.stringify(list)).not.toContain(k.api_key)
  })

  it('reports when a key was last used', async () => {
    const k = await json(await c.call('POST', '/keys', { name: 'used' }), 201)
    expect(
      (await chat(m.url, k.api_key, { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }] })).status,
    ).toBe(402)
    const listed = (await json(await c.call('GET', '/keys'))).data.find((x: { id: string }) => x.id === k.id)
    expect(listed.last_used).toBeGreaterThanOrEqual(k.created)
  })

  // A control, a lone surrogate or a bidirectional override (a name posing as another) is not printable.
  it.each([[''], ['   '], ['x'.repeat(65)], [42], ['tab\there'], ['a\u007fb'], ['a\u202eb'], ['\ud800']])(
    'refuses the name %j',
    async (name) => {
      const body = await json(await c.call('POST', '/keys', { name }), 400)
      expect(body.error).toMatchObject({ code: 'feature_not_supported', param: 'name' })
    },
  )

  it('refuses new keys for a suspended account', async () => {
    const other = privateKeyToAccount(generatePrivateKey())
    const s = await signIn(m.url, other)
    const account = (await m.store.accounts.byAddress(other.address))!
    await m.store.accounts.setStatus(account.id, 'suspended')
    expect((await json(await s.call('GET', '/session'))).status).toBe('suspended')
    const body = await json(await s.call('POST', '/keys', { name: 'k' }), 403)
    expect(body.error.code).toBe('account_suspended')
  })
})

describe.each(STORE_KINDS)('the live-key bound on %s', (kind) => {
  it('lets creations at the same time fill the last of 50 live keys and none past it', async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    const market = await startMarket({ store: kind })
    try {
      const s = await signIn(market.url, privateKeyToAccount(generatePrivateKey()))
      const create = (n: number, from: number) =>
        Promise.all(Array.from({ length: n }, (_, i) => s.call('POST', '/keys', { name: `k${from + i}` })))
      expect((await create(49, 0)).map((r) => r.status)).toEqual(Array(49).fill(201))
      // Twenty at once for the one place left: each could count 49 before any of them inserts.
      const created = await create(20, 49)
      expect(created.filter((r) => r.status === 201)).toHaveLength(1)
      const refused = await Promise.all(created.filter((r) => r.status !== 201).map((r) => json(r, 400)))
      for (const body of refused)
        expect(body.error).toMatchObject({
          code: 'feature_not_supported',
          message: 'This account has 50 live keys, the most allowed; revoke one first.',
        })
      expect((await json(await s.call('GET', '/keys'))).data).toHaveLength(50)
    } finally {
      await market.close()
    }
  })
})

describe('wallet on the local rail', () => {
  it('shows balance, cap, held and spendable; deposits and changes the cap', async () => {
    const w0 = await json(await c.call('GET', '/wallet'))
    expect(w0).toMatchObject({
      address: user.address,
      balance: '0.000000',
      cap: '0.000000',
      held: '0.000000',
      spendable: '0.000000',
    })
    const w1 = await json(await c.call('POST', '/wallet/deposit', { amount: '12.5' }))
    expect(w1).toMatchObject({ balance: '12.500000', spendable: '0.000000' })
    const w2 = await json(await c.call('POST', '/wallet/cap', { amount: '5' }))
    expect(w2).toMatchObject({ balance: '12.500000', cap: '5.000000', spendable: '5.000000' })
    const w3 = await json(await c.call('POST', '/wallet/cap', { amount: '0' }))
    expect(w3).toMatchObject({ cap: '0.000000', spendable: '0.000000' })
    await c.call('POST', '/wallet/cap', { amount: '10' })
  })

  it.each([
    ['/wallet/deposit', '0'],
    ['/wallet/deposit', '-1'],
    ['/wallet/deposit', '1.0000001'],
    ['/wallet/deposit', '10000.000001'],
    ['/wallet/deposit', 5],
    ['/wallet/cap', 'lots'],
    ['/wallet/cap', '1000000.000001'],
  ])('%s refuses %j', async (path, amount) => {
    const body = await json(await c.call('POST', path, { amount }), 400)
    expect(body.error).toMatchObject({ code: 'feature_not_supported', param: 'amount' })
  })

  it('tells the page which rail it is on', async () => {
    const config = await json(await fetch(`${m.url}/portal/api/config`))
    expect(config).toEqual({
      object: 'portal.config',
      chain_id: 31337,
      rail: { kind: 'local' },
      local_test_wallet: true,
    })
  })
})

describe('usage and provider earnings', () => {
  it('lists a request with its cost, filters by key and model, totals it and charts it by day', async () => {
    await c.call('POST', '/wallet/deposit', { amount: '1' })
    const k = await json(await c.call('POST', '/keys', { name: 'usage' }), 201)
    const res = await chat(m.url, k.api_key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 20,
    })
    expect(res.status).toBe(200)
    const reply = await res.json()
    const list = await json(await c.call('GET', `/usage?key_id=${k.id}`))
    expect(list.data).toHaveLength(1)
    expect(list.data[0]).toMatchObject({
      request_id: reply.svc.request_id,
      model: 'svc/atlas@1',
      provider: provider.address,
      outcome: 'completed',
      cost_usdc: reply.svc.cost_usdc,
    })
    expect((await json(await c.call('GET', `/usage?key_id=${k.id}&model=svc/tern@2`))).data).toEqual([])
    const summary = await json(await c.call('GET', `/usage/summary?key_id=${k.id}&days=7`))
    expect(summary.totals).toEqual({
      requests: 1,
      prompt_tokens: reply.usage.prompt_tokens,
      completion_tokens: reply.usage.completion_tokens,
      cost_usdc: reply.svc.cost_usdc,
    })
    expect(summary.daily).toHaveLength(7)
    expect(summary.daily.at(-1)).toEqual({
      date: new Date().toISOString().slice(0, 10),
      requests: 1,
      cost_usdc: reply.svc.cost_usdc,
    })
    expect(summary.daily[0]).toMatchObject({ requests: 0, cost_usdc: '0.000000' })
    expect((await json(await c.call('GET', '/usage?limit=0'), 400)).error.param).toBe('limit')
    for (const days of ['91', '0', '1e1', '0x10', '%205'])
      expect((await json(await c.call('GET', `/usage/summary?days=${days}`), 400)).error.param).toBe('days')
  })

  it('shows a provider its offers, what it earned, and payouts once settled', async () => {
    const p = await signIn(m.url, provider)
    expect((await json(await p.call('GET', '/session'))).kind).toBe('provider')
    const r = await (
      await chat(m.url, m.key, {
        model: 'svc/atlas@1',
        messages: [{ role: 'user', content: 'pay me' }],
        max_tokens: 10,
      })
    ).json()
    const before = await json(await p.call('GET', '/provider'))
    expect(before.offers).toEqual([
      expect.objectContaining({
        model: 'svc/atlas@1',
        input_price_per_mtok: '150000',
        output_price_per_mtok: '600000',
        breaker: 'closed',
      }),
    ])
    expect(before.requests_served).toBeGreaterThanOrEqual(1)
    expect(Number(before.pending_usdc)).toBeGreaterThan(0)
    expect(before.earned_usdc).toBe(before.pending_usdc)
    await m.server.settler.runOnce()
    const after = await json(await p.call('GET', '/provider'))
    expect(after.pending_usdc).toBe('0.000000')
    expect(after.settled_usdc).toBe(before.earned_usdc)
    expect(after.payouts[0]).toMatchObject({ status: 'settled', amount_usdc: before.earned_usdc })
    expect(Number(r.svc.cost_usdc)).toBeGreaterThan(0)
    const notProvider = await json(await c.call('GET', '/provider'), 404)
    expect(notProvider.error.code).toBe('feature_not_supported')
  })

  it("is shown to a wallet listed in providers[] after its account was created as a user's", async () => {
    const late = privateKeyToAccount(generatePrivateKey())
    const { account } = await openAccount(m.store, late.address, Date.now())
    expect(account.kind).toBe('user')
    const config = structuredClone(m.config)
    config.providers[0]!.address = late.address
    const s = await startServer(
      { ...config, listen: { host: '127.0.0.1', port: 0 } },
      { store: m.store, log: () => {} },
    )
    try {
      const p = await signIn(s.url, late)
      expect(await json(await p.call('GET', '/session'))).toMatchObject({ kind: 'user', provider: true })
      expect(
        (
          await chat(s.url, m.key, {
            model: 'svc/atlas@1',
            messages: [{ role: 'user', content: 'pay me' }],
            max_tokens: 10,
          })
        ).status,
      ).toBe(200)
      const earned = await json(await p.call('GET', '/provider'))
      expect(earned.offers).toEqual([expect.objectContaining({ model: 'svc/atlas@1', input_price_per_mtok: '150000' })])
      expect(earned.requests_served).toBe(1)
      expect(Number(earned.pending_usdc)).toBeGreaterThan(0)
      // The CLI's view of the account shows it too.
      expect(await accountView(m.store, (await m.store.accounts.byId(account.id))!)).toMatchObject({
        kind: 'user',
        earned_pending: earned.pending_usdc,
      })
      // Still a user that pays: its own keys and spending are unchanged by it.
      expect((await json(await p.call('GET', '/wallet'))).kind).toBe('user')
    } finally {
      await s.close()
    }
    // A wallet that is not listed stays a user only.
    expect(await json(await c.call('GET', '/session'))).toMatchObject({ kind: 'user', provider: false })
  })
})

describe('the page', () => {
  it('is served at /portal with a strict content security policy, assets cached, nothing outside its folder', async () => {
    const web = mkdtempSync(join(tmpdir(), 'svc-web-'))
    mkdirSync(join(web, 'assets'))
    writeFileSync(join(web, 'index.html'), '<!doctype html><title>portal</title>')
    writeFileSync(join(web, 'assets', 'app-1234.js'), 'console.log(1)')
    const s = await startServer(
      { ...m.config, listen: { host: '127.0.0.1', port: 0 } },
      { store: m.store, log: () => {}, portal: { webRoot: web } },
    )
    try {
      for (const path of ['/portal', '/portal/', '/portal/index.html']) {
        const page = await fetch(`${s.url}${path}`)
        expect(page.status).toBe(200)
        expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
        expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
        expect(await page.text()).toContain('<title>portal</title>')
      }
      const asset = await fetch(`${s.url}/portal/assets/app-1234.js`)
      expect(asset.headers.get('cache-control')).toContain('immutable')
      expect(asset.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
      expect((await fetch(`${s.url}/portal/..%2Fpackage.json`)).status).toBe(404)
      expect((await fetch(`${s.url}/portal/assets/missing.js`)).status).toBe(404)
      const api = await fetch(`${s.url}/portal/api/nothing-here`)
      expect(api.status).toBe(404)
      expect((await api.json()).error.code).toBe('feature_not_supported')
    } finally {
      await s.close()
    }
  })

  it('says how to build it when the front end is missing', async () => {
    const s = await startServer(
      { ...m.config, listen: { host: '127.0.0.1', port: 0 } },
      { store: m.store, log: () => {}, portal: { webRoot: join(tmpdir(), 'svc-no-such-web') } },
    )
    try {
      const page = await fetch(`${s.url}/portal`)
      expect(page.status).toBe(503)
      expect(await page.text()).toContain('npm run build')
    } finally {
      await s.close()
    }
  })
})
