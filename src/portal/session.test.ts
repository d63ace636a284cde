import { describe, expect, it } from 'vitest'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { openStore } from '../store/open.js'
import { readCookie, sameToken, Sessions, SESSION_COOKIE } from './session.js'

/** A request and reply just rich enough for the session code. */
function fakes(protocol: 'http' | 'https', cookie?: string) {
  const headers: Record<string, string> = {}
  const req = { protocol, headers: cookie ? { cookie } : {} } as unknown as FastifyRequest
  const reply = { header: (k: string, v: string) => void (headers[k] = v) } as unknown as FastifyReply
  return { req, reply, headers }
}

describe('portal sessions', () => {
  it('sets Secure only over https, and reads back its own cookie only', async () => {
    const store = await openStore('sqlite::memory:')
    try {
      const account = (await store.accounts.ensure('0x1111111111111111111111111111111111111111', 'user', Date.now()))
        .account
      const sessions = new Sessions(store, 'a-session-secret-of-16+', Date.now)
      const http = fakes('http')
      await sessions.start(http.req, http.reply, account.id, account.address)
      expect(http.headers['set-cookie']).not.toContain('Secure')
      const https = fakes('https')
      const s = await sessions.start(https.req, https.reply, account.id, account.address)
      expect(https.headers['set-cookie']).toMatch(/; HttpOnly; SameSite=Lax; Secure$/)
      const cookie = https.headers['set-cookie']!.split(';')[0]!
      expect(await sessions.current(fakes('https', `other=1; ${cookie}`).req)).toMatchObject({ id: s.id, csrf: s.csrf })
      // Another gateway with another secret does not accept it (several processes need portal.sessionSecret).
      expect(
        await new Sessions(store, 'another-secret-of-16+++', Date.now).current(fakes('https', cookie).req),
      ).toBeUndefined()
      // Behind a TLS proxy whose X-Forwarded-Proto is not trusted the request looks like http: an https portal.origin
      // still makes the cookie Secure, at sign-in and at sign-out.
      const proxied = new Sessions(store, 'a-session-secret-of-16+', Date.now, 'https://portal.example.com')
      const behind = fakes('http')
      const p = await proxied.start(behind.req, behind.reply, account.id, account.address)
      expect(behind.headers['set-cookie']).toMatch(/; Secure$/)
      const out = fakes('http')
      await proxied.end(out.req, out.reply, p)
      expect(out.headers['set-cookie']).toMatch(/Max-Age=0; HttpOnly; SameSite=Lax; Secure$/)
      const plain = fakes('http')
      await new Sessions(store, 'a-session-secret-of-16+', Date.now, 'http://127.0.0.1:8080').start(
        plain.req,
        plain.reply,
        account.id,
        account.address,
      )
      expect(plain.headers['set-cookie']).not.toContain('Secure')
    } finally {
      await store.close()
    }
  })

  it('parses cookie headers and compares tokens', () => {
    expect(readCookie(`a=1; ${SESSION_COOKIE}=x.y ; b=2`, SESSION_COOKIE)).toBe('x.y')
    expect(readCookie('a=1', SESSION_COOKIE)).toBeUndefined()
    expect(sameToken('abc', 'abc')).toBe(true)
    expect(sameToken('abd', 'abc')).toBe(false)
    expect(sameToken(undefined, 'abc')).toBe(false)
  })
})
