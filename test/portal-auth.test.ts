import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { chat, marketConfig, marketPerTest, startMarket, type Market } from './helpers/market.js'
import { validateConfig } from '../src/config.js'
import { cookieOf, expectError, fetchNonce, portalClient, postSession, signIn, siweMessage } from './helpers/portal.js'

/** Sign-in with Ethereum, sessions and CSRF: the rules of the portal API's front door. */
let m: Market
const alice = privateKeyToAccount(generatePrivateKey())
const mallory = privateKeyToAccount(generatePrivateKey())

beforeAll(async () => {
  // A long key cache proves that revocation through the portal reaches the verifier at once.
  m = await startMarket({ tuning: { keyCacheMs: 60_000 } })
})
afterAll(() => m?.close())

describe('sign-in', () => {
  it('issues a nonce naming this host, signs in and sets a strict session cookie', async () => {
    const n = await fetchNonce(m.url)
    expect(n.nonce).toMatch(/^[0-9a-f]{32}$/)
    expect(n.domain).toBe(new URL(m.url).host)
    expect(n.uri).toBe(`${m.url}/portal`)
    expect(n.chain_id).toBe(31337)
    const message = siweMessage(n, alice.address)
    const res = await postSession(m.url, message, await alice.signMessage({ message }))
    expect(res.status).toBe(200)
    const set = res.headers.get('set-cookie')!
    expect(set).toMatch(/^svc_portal=[\w-]+\.[\w-]+; /)
    expect(set).toContain('Path=/portal')
    expect(set).toContain('HttpOnly')
    expect(set).toContain('SameSite=Lax')
    expect(set).not.toContain('Secure') // served over http here
    const body = await res.json()
    expect(body).toMatchObject({ address: alice.address, kind: 'user', status: 'active' })
    const me = await fetch(`${m.url}/portal/api/session`, { headers: { cookie: cookieOf(res) } })
    expect(await me.json()).toMatchObject({ address: alice.address, csrf_token: body.csrf_token })
  })

  it('refuses a body larger than anything the portal takes with 413, before parsing it', async () => {
    const big = JSON.stringify({ message: 'x'.repeat(70 * 1024), signature: '0x' })
    const res = await fetch(`${m.url}/portal/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: m.url },
      body: big,
    })
    await expectError(
      res,
      413,
      'feature_not_supported',
      /larger than this endpoint takes \(4 MiB on \/v1, 64 KiB on the portal's API\)/,
    )
    // The API's own limit is unchanged.
    const api = await chat(m.url, m.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'x'.repeat(70 * 1024) }],
      max_tokens: 3,
    })
    expect(api.status).toBe(200)
  })

  it('refuses a replayed nonce', async () => {
    const n = await fetchNonce(m.url)
    const message = siweMessage(n, alice.address)
    const signature = await alice.signMessage({ message })
    expect((await postSession(m.url, message, signature)).status).toBe(200)
    await expectError(
      await postSession(m.url, message, signature),
      401,
      'sign_in_failed',
      /unknown, expired or already used/,
    )
  })

  it('refuses an expired nonce', async () => {
    const fresh = await fetchNonce(m.url)
    const nonce = 'a1'.repeat(16)
    await m.store.portal.issueNonce(nonce, Date.now() - 600_000, Date.now() - 300_000)
    const message = siweMessage({ ...fresh, nonce }, alice.address)
    await expectError(
      await postSession(m.url, message, await alice.signMessage({ message })),
      401,
      'sign_in_failed',
      /expired/,
    )
  })

  it('refuses a nonce the server never issued', async () => {
    const message = siweMessage({ ...(await fetchNonce(m.url)), nonce: 'b2'.repeat(16) }, alice.address)
    await expectError(
      await postSession(m.url, message, await alice.signMessage({ message })),
      401,
      'sign_in_failed',
      /unknown/,
    )
  })

  it('refuses a signature from another address, and burns the nonce', async () => {
    const n = await fetchNonce(m.url)
    const message = siweMessage(n, alice.address)
    await expectError(
      await postSession(m.url, message, await mallory.signMessage({ message })),
      401,
      'sign_in_failed',
      new RegExp(`not from ${alice.address}`),
    )
    // Alice's own signature of that message is now too late: every attempt uses the nonce up.
    await expectError(
      await postSession(m.url, message, await alice.signMessage({ message })),
      401,
      'sign_in_failed',
      /already used/,
    )
  })

  it.each([
    ['another domain', { domain: 'evil.example' }, /is for evil\.example/],
    ['another origin', { uri: 'https://evil.example/portal' }, /not on http/],
    ['another chain', { chainId: 1 }, /chain 1/],
    ['an expired message', { expirationTime: new Date(Date.now() - 1000) }, /expired/],
    ['a message from the future', { issuedAt: new Date(Date.now() + 3_600_000) }, /future/],
  ])('refuses %s', async (_what, edit, why) => {
    const message = siweMessage(await fetchNonce(m.url), alice.address, edit)
    await expectError(
      await postSession(m.url, message, await alice.signMessage({ message })),
      401,
      'sign_in_failed',
      why,
    )
  })

  it('refuses malformed bodies with the field at fault', async () => {
    const res = await postSession(m.url, 'not a siwe message', 'nope')
    expect(res.status).toBe(400)
    expect((await res.json()).error).toMatchObject({ code: 'feature_not_supported', param: 'signature' })
    await expectError(
      await postSession(m.url, 'hello', `0x${'11'.repeat(65)}`),
      401,
      'sign_in_failed',
      /not an EIP-4361 message/,
    )
  })
})

// Its own server: the sign-in limit per address would refuse the nonces of the rest of the file.
describe('sign-in message dates', () => {
  const market = marketPerTest()

  it.each([
    ['Issued At', {}],
    ['Expiration Time', { expirationTime: new Date(Date.now() + 60_000) }],
    ['Not Before', { notBefore: new Date(Date.now() - 60_000) }],
  ])('refuses a message whose %s is not a date, though its signature is good', async (field, edit) => {
    const dated = await market()
    const signed = siweMessage(await fetchNonce(dated.url), alice.address, edit)
    const message = signed.replace(new RegExp(`^${field}: .*$`, 'm'), `${field}: notadate`)
    expect(message).not.toBe(signed)
    await expectError(
      await postSession(dated.url, message, await alice.signMessage({ message })),
      401,
      'sign_in_failed',
      new RegExp(`${field} is not an RFC 3339`),
    )
  })
})

describe('sessions', () => {
  it('refuses requests without a session, with a tampered cookie, or after sign-out', async () => {
    await expectError(await fetch(`${m.url}/portal/api/keys`), 401, 'session_required')
    const c = await signIn(m.url, alice)
    expect((await c.call('GET', '/keys')).status).toBe(200)
    const [name, value] = c.cookie.split('=') as [string, string]
    const flipped = value.slice(0, 5) + (value[5] === 'A' ? 'B' : 'A') + value.slice(6)
    await expectError(
      await fetch(`${m.url}/portal/api/keys`, { headers: { cookie: `${name}=${flipped}` } }),
      401,
      'session_required',
    )
    // A correctly signed secret that no session has (as if forged with a leaked secret) fails at the store.
    await expectError(
      await fetch(`${m.url}/portal/api/keys`, { headers: { cookie: `${name}=x.${value.split('.')[1]}` } }),
      401,
      'session_required',
    )
    const out = await c.call('DELETE', '/session')
    expect(out.status).toBe(200)
    expect(out.headers.get('set-cookie')).toMatch(/^svc_portal=; .*Max-Age=0/)
    await expectError(await c.call('GET', '/keys'), 401, 'session_required')
  })

  it('keeps API keys out of the portal and sessions out of /v1', async () => {
    const c = await signIn(m.url, alice)
    await expectError(
      await c.call('GET', '/keys', undefined, { authorization: `Bearer ${m.key}` }),
      401,
      'session_required',
      /does not accept API keys/,
    )
    await expectError(
      await fetch(`${m.url}/portal/api/wallet`, { headers: { authorization: `Bearer ${m.key}` } }),
      401,
      'session_required',
    )
    const res = await chat(
      m.url,
      undefined,
      { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }] },
      { cookie: c.cookie },
    )
    expect(res.status).toBe(401)
    expect((await res.json()).error.code).toBe('invalid_api_key')
    const usage = await fetch(`${m.url}/v1/usage`, { headers: { cookie: c.cookie } })
    expect(usage.status).toBe(401)
  })
})

describe('CSRF', () => {
  it('needs the session token for every state change', async () => {
    const c = await signIn(m.url, alice)
    await expectError(
      await c.call('POST', '/keys', { name: 'k' }, { 'x-csrf-token': '' }),
      403,
      'csrf_failed',
      /x-csrf-token/,
    )
    await expectError(await c.call('POST', '/keys', { name: 'k' }, { 'x-csrf-token': 'wrong' }), 403, 'csrf_failed')
    await expectError(await c.call('DELETE', '/session', undefined, { 'x-csrf-token': 'wrong' }), 403, 'csrf_failed')
    // Another session's token does not fit this one.
    const other = await signIn(m.url, alice)
    await expectError(
      await c.call('POST', '/wallet/deposit', { amount: '1' }, { 'x-csrf-token': other.csrf }),
      403,
      'csrf_failed',
    )
    expect((await c.call('POST', '/keys', { name: 'k' })).status).toBe(201)
    expect((await c.call('GET', '/session')).status).toBe(200)
  })

  it('refuses state changes from another origin or not sent as JSON', async () => {
    const c = await signIn(m.url, alice)
    await expectError(
      await c.call('POST', '/keys', { name: 'k' }, { origin: 'https://evil.example' }),
      403,
      'csrf_failed',
      /another origin/,
    )
    expect((await c.call('POST', '/keys', { name: 'k' }, { origin: m.url })).status).toBe(201)
    const form = await fetch(`${m.url}/portal/api/keys`, {
      method: 'POST',
      headers: { cookie: c.cookie, 'x-csrf-token': c.csrf, 'content-type': 'text/plain' },
      body: '{"name":"k"}',
    })
    await expectError(form, 403, 'csrf_failed', /application\/json/)
    // Sign-in itself: another site cannot post a signed message for the visitor.
    const n = await fetchNonce(m.url)
    const message = siweMessage(n, mallory.address)
    await expectError(
      await postSession(m.url, message, await mallory.signMessage({ message }), { origin: 'https://evil.example' }),
      403,
      'csrf_failed',
    )
  })
})

describe('accounts stay apart', () => {
  it("shows and revokes only the account's own keys; a revoked key is refused at once", async () => {
    const a = await signIn(m.url, alice)
    const b = await signIn(m.url, mallory)
    const created = await (await a.call('POST', '/keys', { name: 'alice-main' })).json()
    expect(created.api_key).toMatch(/^svc_test_[0-9A-Za-z]{40}$/)
    const ok = await chat(m.url, created.api_key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 5,
    })
    expect(ok.status).toBe(402) // alice has no funds yet: the key is valid, her balance is not
    const bKeys = await (await b.call('GET', '/keys')).json()
    expect(bKeys.data.map((k: { id: string }) => k.id)).not.toContain(created.id)
    await expectError(await b.call('DELETE', `/keys/${created.id}`), 404, 'feature_not_supported', [
      /no live key/,
      'key_id',
    ])
    const bUsage = await (await b.call('GET', `/usage?key_id=${created.id}`)).json()
    expect(bUsage.data).toEqual([])
    expect((await a.call('DELETE', `/keys/${created.id}`)).status).toBe(200)
    const refused = await chat(m.url, created.api_key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 5,
    })
    expect(refused.status).toBe(401)
    expect((await refused.json()).error.code).toBe('invalid_api_key')
    await expectError(await a.call('DELETE', `/keys/${created.id}`), 404, 'feature_not_supported', [
      /no live key/,
      'key_id',
    ])
  })

  it('a session cookie of one server secret is refused by a portal with another', async () => {
    const c = await signIn(m.url, alice)
    const forged = portalClient(m.url, `${c.cookie.split('.')[0]}.AAAA`, c.csrf, c.address)
    await expectError(await forged.call('GET', '/wallet'), 401, 'session_required')
  })
})

describe('portal.origin', () => {
  it('is refused when it is more than an origin', () => {
    for (const origin of [
      'https://portal.example.com/portal',
      'https://portal.example.com?x=1',
      'ftp://portal.example.com',
      'https://',
    ]) {
      expect(() => validateConfig({ ...marketConfig(m.sims, 'sqlite::memory:'), portal: { origin } })).toThrow(
        /portal\.origin/,
      )
    }
    expect(() =>
      validateConfig({ ...marketConfig(m.sims, 'sqlite::memory:'), portal: { origin: 'http://127.0.0.1:8080/' } }),
    ).not.toThrow()
  })
})
