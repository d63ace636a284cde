import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Store } from '../store/store.js'
import type { PortalSession } from '../store/portal.js'

export const SESSION_COOKIE = 'svc_portal'
/** The cookie reaches the portal only: a session is never sent with /v1 requests. */
const COOKIE_PATH = '/portal'
export const SESSION_TTL_MS = 12 * 3600_000

const b64url = (b: Buffer) => b.toString('base64url')
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

/**
 * Portal sessions: the cookie holds a random secret and its HMAC under the session secret; the store keeps only
 * the secret's hash, so a forged cookie is refused without a query and a leaked table signs no one in.
 */
export class Sessions {
  private readonly key: Buffer

  /**
   * `origin`: where browsers reach the portal (`portal.origin`). When it is https the cookie is always Secure, also
   * when a TLS proxy in front forwards plain http and the gateway does not trust its X-Forwarded-Proto.
   */
  constructor(
    private readonly store: Store,
    secret: string | undefined,
    private readonly now: () => number,
    private readonly origin?: string,
  ) {
    // Without a configured secret, sessions last as long as this process; several processes need a shared one.
    this.key = secret ? Buffer.from(secret, 'utf8') : randomBytes(32)
  }

  /** Starts a session for the account and sets its cookie; returns the session (with its CSRF token). */
  async start(req: FastifyRequest, reply: FastifyReply, accountId: number, address: string): Promise<PortalSession> {
    const secret = b64url(randomBytes(32))
    const now = this.now()
    const session: PortalSession = {
      id: sha256(secret),
      accountId,
      address,
      csrf: b64url(randomBytes(24)),
      createdAt: now,
      expiresAt: now + SESSION_TTL_MS,
    }
    await this.store.portal.createSession(session)
    setCookie(reply, {
      value: `${secret}.${this.mac(secret)}`,
      maxAgeSeconds: Math.floor(SESSION_TTL_MS / 1000),
      secure: this.secure(req),
    })
    return session
  }

  /** The live session the request's cookie names, or undefined (no cookie, bad signature, signed out, expired). */
  async current(req: FastifyRequest): Promise<PortalSession | undefined> {
    const value = readCookie(req.headers.cookie, SESSION_COOKIE)
    if (!value) return undefined
    const dot = value.indexOf('.')
    if (dot < 1) return undefined
    const secret = value.slice(0, dot)
    const given = Buffer.from(value.slice(dot + 1))
    const expected = Buffer.from(this.mac(secret))
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined
    return this.store.portal.session(sha256(secret), this.now())
  }

  async end(req: FastifyRequest, reply: FastifyReply, session: PortalSession): Promise<void> {
    await this.store.portal.deleteSession(session.id)
    setCookie(reply, { value: '', maxAgeSeconds: 0, secure: this.secure(req) })
  }

  private secure(req: FastifyRequest): boolean {
    return req.protocol === 'https' || this.origin?.startsWith('https:') === true
  }

  private mac(secret: string): string {
    return b64url(createHmac('sha256', this.key).update(secret).digest())
  }
}

/** Secure when the portal is served over https; HttpOnly keeps it from scripts; Lax keeps it off cross-site posts. */
function setCookie(
  reply: FastifyReply,
  { value, maxAgeSeconds, secure }: { value: string; maxAgeSeconds: number; secure: boolean },
): void {
  const parts = [
    `${SESSION_COOKIE}=${value}`,
    `Path=${COOKIE_PATH}`,
    `Max-Age=${maxAgeSeconds}`,
    'HttpOnly',
    'SameSite=Lax',
  ]
  if (secure) parts.push('Secure')
  reply.header('set-cookie', parts.join('; '))
}

export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

/** Constant-time comparison of a presented token with the expected one. */
export function sameToken(given: string | undefined, expected: string): boolean {
  if (!given) return false
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}
