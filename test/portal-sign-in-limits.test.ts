import { request as httpRequest } from 'node:http'
import { describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { startMarket } from './helpers/market.js'
import { expectError, fetchNonce, postSession, siweMessage } from './helpers/portal.js'

const alice = privateKeyToAccount(generatePrivateKey())

const nonceFrom = (url: string, forwardedFor: string) =>
  fetch(`${url}/portal/api/nonce`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor },
    body: '{}',
  })

describe('sign-in attempts', () => {
  it('limits the nonces one client address may ask for, with Retry-After, and keeps the ones it gave', async () => {
    const limited = await startMarket({ edit: (c) => void (c.portal = { ...c.portal, signInsPerMinute: 3 }) })
    try {
      const given = [await fetchNonce(limited.url), await fetchNonce(limited.url), await fetchNonce(limited.url)]
      const refused = await fetch(`${limited.url}/portal/api/nonce`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      })
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      await expectError(refused, 429, 'sign_in_failed', /too many sign-in attempts/i)
      // A nonce issued before the limit still signs in.
      const message = siweMessage(given[2]!, alice.address)
      expect((await postSession(limited.url, message, await alice.signMessage({ message }))).status).toBe(200)
      // Without trustProxy a forwarded address is not believed: still the same client.
      expect((await nonceFrom(limited.url, '203.0.113.7')).status).toBe(429)
      // Sign-in attempts are limited too, three per nonce allowed, counted apart (the sign-in above was the first of
      // 9).
      for (let i = 0; i < 8; i++) expect((await postSession(limited.url, 'not a message', '0x00')).status).toBe(401)
      const tooMany = await postSession(limited.url, 'not a message', '0x00')
      expect(Number(tooMany.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      await expectError(tooMany, 429, 'sign_in_failed', /too many sign-in attempts/i)
    } finally {
      await limited.close()
    }
  })

  it('counts each forwarded client on its own behind a trusted proxy', async () => {
    const proxied = await startMarket({
      edit: (c) =>
        void ((c.portal = { ...c.portal, signInsPerMinute: 2 }), (c.listen = { ...c.listen, trustProxy: true })),
    })
    try {
      for (const client of ['203.0.113.7', '203.0.113.8']) {
        expect((await nonceFrom(proxied.url, client)).status).toBe(200)
        expect((await nonceFrom(proxied.url, client)).status).toBe(200)
        expect((await nonceFrom(proxied.url, client)).status).toBe(429)
      }
      // The client is the address the proxy appended; what the client itself put before it is not believed, so a
      // new made-up address per request does not make a new client.
      for (const made of ['198.51.100.1', '198.51.100.2'])
        expect((await nonceFrom(proxied.url, `${made}, 203.0.113.9`)).status).toBe(200)
      expect((await nonceFrom(proxied.url, '198.51.100.3, 203.0.113.9')).status).toBe(429)
    } finally {
      await proxied.close()
    }
  })
})

/** A portal API POST naming the Host (and other headers) a phishing site's server would send: fetch cannot. */
function postAs(
  url: string,
  path: string,
  headers: Record<string, string>,
  body: unknown,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tests read any field of the JSON
): Promise<{ status: number; json: any }> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: hostname,
        port,
        path: `/portal/api${path}`,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let text = ''
        res
          .setEncoding('utf8')
          .on('data', (d: string) => (text += d))
          .on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) }))
      },
    )
    req.on('error', reject).end(JSON.stringify(body))
  })
}

describe('the domain sign-in messages must name', () => {
  it('is this machine, whatever Host or X-Forwarded-Host a phishing site sends', async () => {
    const proxied = await startMarket({ edit: (c) => void (c.listen = { ...c.listen, trustProxy: true }) })
    try {
      for (const headers of [
        { host: 'evil.example' },
        { host: `evil.example:${new URL(proxied.url).port}` },
        { 'x-forwarded-host': 'evil.example' },
      ]) {
        const n = await postAs(proxied.url, '/nonce', headers, {})
        expect(n.status).toBe(200)
        expect(n.json).toMatchObject({ domain: new URL(proxied.url).host, uri: `${proxied.url}/portal` })
        // The victim, on the phishing site, signs a message for it: refused, with the nonce burnt.
        const message = siweMessage(
          { ...n.json, domain: 'evil.example', uri: 'http://evil.example/portal' },
          alice.address,
        )
        const res = await postAs(proxied.url, '/session', headers, {
          message,
          signature: await alice.signMessage({ message }),
        })
        expect(res.status).toBe(401)
        expect(res.json.error).toMatchObject({
          code: 'sign_in_failed',
          message: expect.stringContaining('evil.example'),
        })
      }
    } finally {
      await proxied.close()
    }
  })

  it('keeps a loopback name the browser used, on this port', async () => {
    // A market of its own: the nonces this file asked for already reach the per-address limit.
    const own = await startMarket()
    try {
      const port = new URL(own.url).port
      const n = await postAs(own.url, '/nonce', { host: `localhost:${port}` }, {})
      expect(n.json).toMatchObject({ domain: `localhost:${port}`, uri: `http://localhost:${port}/portal` })
      const message = siweMessage(n.json, alice.address)
      expect(
        (
          await postAs(
            own.url,
            '/session',
            { host: `localhost:${port}` },
            { message, signature: await alice.signMessage({ message }) },
          )
        ).status,
      ).toBe(200)
      // Another port is not this portal.
      expect((await postAs(own.url, '/nonce', { host: 'localhost:1' }, {})).json.domain).toBe(new URL(own.url).host)
    } finally {
      await own.close()
    }
  })

  it('is portal.origin when configured, for every Host', async () => {
    const configured = await startMarket({
      edit: (c) => void (c.portal = { ...c.portal, origin: 'https://portal.example.com' }),
    })
    try {
      const n = await fetchNonce(configured.url)
      expect(n).toMatchObject({ domain: 'portal.example.com', uri: 'https://portal.example.com/portal' })
      const own = siweMessage(n, alice.address)
      expect((await postSession(configured.url, own, await alice.signMessage({ message: own }))).status).toBe(200)
      const local = siweMessage(
        {
          ...(await fetchNonce(configured.url)),
          domain: new URL(configured.url).host,
          uri: `${configured.url}/portal`,
        },
        alice.address,
      )
      await expectError(
        await postSession(configured.url, local, await alice.signMessage({ message: local })),
        401,
        'sign_in_failed',
        /this portal is portal\.example\.com/,
      )
    } finally {
      await configured.close()
    }
  })

  it('takes writes from portal.origin, whatever Host a proxy in front sends, and from no other scheme or host', async () => {
    const configured = await startMarket({
      edit: (c) => void (c.portal = { ...c.portal, origin: 'https://portal.example.com' }),
    })
    try {
      // A proxy that passes its upstream's address as Host (nginx's default), and the browser's own Origin.
      expect((await postAs(configured.url, '/nonce', { origin: 'https://portal.example.com' }, {})).status).toBe(200)
      for (const origin of [
        'http://portal.example.com',
        'https://portal.example.com:8443',
        'https://evil.example',
        new URL(configured.url).origin,
      ]) {
        const refused = await postAs(configured.url, '/nonce', { origin, host: 'portal.example.com' }, {})
        expect(refused.status, origin).toBe(403)
        expect(refused.json.error).toMatchObject({
          code: 'csrf_failed',
          message: expect.stringContaining('this portal is https://portal.example.com'),
        })
      }
    } finally {
      await configured.close()
    }
  })
})
