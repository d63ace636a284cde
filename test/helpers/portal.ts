import { expect } from 'vitest'
import { createSiweMessage } from 'viem/siwe'
import type { PrivateKeyAccount } from 'viem/accounts'
import type { SiweMessage } from 'viem/siwe'

/** A signed-in portal client: the session cookie and its CSRF token, as a browser would hold them. */
export interface PortalClient {
  cookie: string
  csrf: string
  address: string
  /** A portal API request with the session cookie, and the CSRF header on state changes. */
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>
}

export interface Nonce {
  nonce: string
  domain: string
  uri: string
  chain_id: number
  statement: string
}

export async function fetchNonce(url: string): Promise<Nonce> {
  const res = await fetch(`${url}/portal/api/nonce`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  })
  if (res.status !== 200) throw new Error(`nonce: ${res.status} ${await res.text()}`)
  return res.json() as Promise<Nonce>
}

/** The EIP-4361 message a wallet would sign for this nonce; `edit` changes fields to build bad ones. */
export function siweMessage(n: Nonce, address: `0x${string}`, edit: Partial<SiweMessage> = {}): string {
  return createSiweMessage({
    domain: n.domain,
    address,
    statement: n.statement,
    uri: n.uri,
    version: '1',
    chainId: n.chain_id,
    nonce: n.nonce,
    issuedAt: new Date(),
    ...edit,
  })
}

export function postSession(
  url: string,
  message: string,
  signature: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${url}/portal/api/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ message, signature }),
  })
}

/** The `name=value` part of a Set-Cookie header. */
export function cookieOf(res: Response): string {
  const set = res.headers.get('set-cookie')
  if (!set) throw new Error('no session cookie set')
  return set.split(';')[0]!
}

export function portalClient(url: string, cookie: string, csrf: string, address: string): PortalClient {
  return {
    cookie,
    csrf,
    address,
    call(method, path, body, headers = {}) {
      const write = method !== 'GET'
      return fetch(`${url}/portal/api${path}`, {
        method,
        headers: {
          cookie,
          ...(write ? { 'x-csrf-token': csrf } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      })
    },
  }
}

/** Signs in with the account's key, as the portal page does. */
export async function signIn(url: string, account: PrivateKeyAccount): Promise<PortalClient> {
  const n = await fetchNonce(url)
  const message = siweMessage(n, account.address)
  const res = await postSession(url, message, await account.signMessage({ message }))
  if (res.status !== 200) throw new Error(`sign-in: ${res.status} ${await res.text()}`)
  const body = (await res.json()) as { csrf_token: string; address: string }
  return portalClient(url, cookieOf(res), body.csrf_token, body.address)
}

/** `why`: what the message must match, and the param it must name when it names one. */
export async function expectError(
  res: Response,
  status: number,
  code: string,
  why?: RegExp | readonly [RegExp, string],
) {
  const [message, param] = Array.isArray(why) ? why : [why, null]
  expect(res.status).toBe(status)
  expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  const body = await res.json()
  expect(body.error).toMatchObject({ code, param })
  expect(typeof body.error.type).toBe('string')
  if (message) expect(body.error.message).toMatch(message)
}
