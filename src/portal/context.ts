import type { FastifyRequest } from 'fastify'
import type { Config } from '../config-schema.js'
import type { KeyVerifier } from '../auth/verifier.js'
import type { Catalog } from '../routing/catalog.js'
import type { Health } from '../routing/health.js'
import type { Store } from '../store/store.js'
import type { UsageQueries } from '../usage/query.js'
import type { Account } from '../store/accounts.js'
import type { Sessions } from './session.js'
import type { AttemptLimiter } from './attempts.js'

/** What every portal route needs. */
export interface PortalContext {
  store: Store
  keys: KeyVerifier
  usage: UsageQueries
  /** The offers and their health, for a provider's page. */
  catalog: Catalog
  health: Health
  rail: Config['rail']
  /** The account id of each configured provider's address. */
  payees: ReadonlyMap<string, number>
  now: () => number
  sessions: Sessions
  /** The chain id sign-in messages must name. */
  chainId: number
  /** Nonces per client address and minute. */
  signIns: AttemptLimiter
  /**
   * Sign-in attempts (POST /session) per client address and minute: three for each nonce allowed (a refused signature
   * may be retried), counted apart.
   */
  sessionAttempts: AttemptLimiter
  /** `portal.origin`: where browsers reach the portal, when the operator says so. */
  origin: URL | undefined
}

/** Local development chain (anvil, hardhat) when neither the portal nor a chain rail names one. */
const LOCAL_CHAIN_ID = 31337

export function signInChainId(config: Config): number {
  return config.portal?.chainId ?? (config.rail.kind === 'evm' ? config.rail.chainId : LOCAL_CHAIN_ID)
}

/** The host and origin sign-in messages must name (EIP-4361's `domain` and the origin of its `URI`). */
export interface PortalOrigin {
  host: string
  origin: string
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]'])

/**
 * Where this portal is, for sign-in messages: `portal.origin` when configured; else this machine as reached over plain
 * http, by the Host named when that is this machine (a loopback name, or the address the connection reached, on its
 * port), else by that address. Never a Host or X-Forwarded-Host the client chose (docs/architecture.md §15.33).
 */
export function portalOrigin(configured: URL | undefined, req: FastifyRequest): PortalOrigin {
  if (configured) return { host: configured.host, origin: configured.origin }
  const socket = req.raw.socket
  const address = (socket.localAddress ?? '127.0.0.1').replace(/^::ffff:/, '')
  const local = address.includes(':') ? `[${address}]` : address
  const port = socket.localPort
  const named = req.headers.host
  let host = `${local}:${port}`
  if (named !== undefined) {
    try {
      const url = new URL(`http://${named}`)
      const namedPort = url.port === '' ? 80 : Number(url.port)
      if (namedPort === port && (LOOPBACK_NAMES.has(url.hostname) || url.hostname === local)) host = url.host
    } catch {
      // Not a host: this machine's address stands.
    }
  }
  return { host, origin: `http://${host}` }
}

/** Epoch milliseconds → the seconds the API's `created` fields carry. */
export const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000))

/**
 * Whether the account is a provider of this marketplace: its wallet is listed in `providers[]` (README), whatever kind
 * its account was created as (a wallet that signed in, or was created by the CLI, before it was listed stays a user
 * that pays as well), or it was created as one.
 */
export function isProvider(ctx: PortalContext, account: Account): boolean {
  return account.kind === 'provider' || ctx.payees.get(account.address) === account.id
}

export async function accountOf(ctx: PortalContext, accountId: number): Promise<Account> {
  const account = await ctx.store.accounts.byId(accountId)
  if (!account) throw new Error(`session names account ${accountId}, which is gone`)
  return account
}
