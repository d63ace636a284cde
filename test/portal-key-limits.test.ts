import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { chat, startMarket, type Market } from './helpers/market.js'
import { expectError, signIn, type PortalClient } from './helpers/portal.js'

/** A key's rate limits set and changed from the portal, and what requests with it then get. */
let m: Market
let c: PortalClient
let other: PortalClient
beforeAll(async () => {
  m = await startMarket({ tuning: { keyCacheMs: 60_000 } })
  c = await signIn(m.url, privateKeyToAccount(generatePrivateKey()))
  other = await signIn(m.url, privateKeyToAccount(generatePrivateKey()))
  expect((await c.call('POST', '/wallet/deposit', { amount: '5' })).status).toBe(200)
  expect((await c.call('POST', '/wallet/cap', { amount: '5' })).status).toBe(200)
})
afterAll(() => m?.close())

const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }

describe('key limits on the portal', () => {
  it('creates a key with limits, changes them, and requests with it are limited at once', async () => {
    const created = await c.call('POST', '/keys', { name: 'ci', rpm: 5, tpm: null })
    expect(created.status).toBe(201)
    const k = await created.json()
    expect(k).toMatchObject({ rpm: 5, tpm: null })
    const first = await chat(m.url, k.api_key, body)
    expect(first.status, await first.clone().text()).toBe(200)
    expect(first.headers.get('x-ratelimit-remaining-requests')).toBe('4')
    await first.json()
    // Lowered to one a minute: the cached key's old limits are forgotten at once.
    const patched = await c.call('PATCH', `/keys/${k.id}`, { rpm: 1 })
    expect(await patched.json()).toMatchObject({ id: k.id, rpm: 1, tpm: null })
    await expectError(await chat(m.url, k.api_key, body), 429, 'rate_limit_exceeded', /1 request a minute/)
    const list = await (await c.call('GET', '/keys')).json()
    expect(list.data.find((x: { id: string }) => x.id === k.id)).toMatchObject({ rpm: 1, tpm: null })
    // Removed: no limit, no rate headers.
    expect((await c.call('PATCH', `/keys/${k.id}`, { rpm: null })).status).toBe(200)
    const free = await chat(m.url, k.api_key, body)
    expect(free.status).toBe(200)
    expect(free.headers.get('x-ratelimit-limit-requests')).toBeNull()
    await free.json()
  })

  it('sets a spend limit that resets, shows what the key spent in its period, and removes it', async () => {
    const created = await c.call('POST', '/keys', { name: 'bot', spend_limit: '2.5', limit_reset: 'weekly' })
    const k = await created.json()
    expect(k).toMatchObject({ rpm: null, spend_limit: '2.500000', limit_reset: 'weekly' })
    const reply = await chat(m.url, k.api_key, body)
    expect(reply.status).toBe(200)
    const cost = (await reply.json()).svc.cost_usdc
    const listed = (await (await c.call('GET', '/keys')).json()).data.find((x: { id: string }) => x.id === k.id)
    expect(listed.this_period).toMatchObject({ spent_usdc: cost, held_usdc: '0.000000' })
    expect(new Date(listed.this_period.resets_at * 1000).getUTCDay()).toBe(1)
    // Raised: the period's spend is kept; another reset: counted again from the requests of that period.
    const raised = await (await c.call('PATCH', `/keys/${k.id}`, { spend_limit: '3' })).json()
    expect(raised).toMatchObject({ spend_limit: '3.000000', limit_reset: 'weekly', this_period: { spent_usdc: cost } })
    const daily = await (await c.call('PATCH', `/keys/${k.id}`, { limit_reset: 'daily' })).json()
    expect(daily).toMatchObject({ spend_limit: '3.000000', limit_reset: 'daily', this_period: { spent_usdc: cost } })
    const removed = await (await c.call('PATCH', `/keys/${k.id}`, { spend_limit: null })).json()
    expect(removed).toMatchObject({ spend_limit: null, limit_reset: null, this_period: null })
  })

  it('refuses limits that are not whole numbers or USDC, and another account’s key', async () => {
    const k = await (await c.call('POST', '/keys', { name: 'k' })).json()
    for (const [bad, why] of [
      [{ rpm: 0 }, /rpm must be a whole number from 1/],
      [{ rpm: 1.5 }, [/rpm must be a whole number/, 'rpm']],
      [{ tpm: '10' }, [/tpm must be a whole number/, 'tpm']],
      [{ rpm: -3 }, /rpm must be a whole number from 1/],
      [{ spend_limit: 5 }, [/spend_limit must be USDC as a decimal string/, 'spend_limit']],
      [{ spend_limit: '1.0000001' }, [/spend_limit must be USDC/, 'spend_limit']],
      [{ spend_limit: '0' }, /spend limit must be more than 0/],
      [
        { spend_limit: '1', limit_reset: 'hourly' },
        [/limit_reset must be one of none, daily, weekly, monthly/, 'limit_reset'],
      ],
      [{ limit_reset: 'daily' }, [/limit_reset needs a spend_limit/, 'limit_reset']],
    ] as const)
      await expectError(await c.call('PATCH', `/keys/${k.id}`, bad), 400, 'feature_not_supported', why)
    await expectError(await c.call('POST', '/keys', { name: 'x', tpm: 0 }), 400, 'feature_not_supported', /tpm/)
    await expectError(await other.call('PATCH', `/keys/${k.id}`, { rpm: 1 }), 404, 'feature_not_supported', [
      /no live key/,
      'key_id',
    ])
  })
})
