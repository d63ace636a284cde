import type { FastifyRequest } from 'fastify'
import type { Config } from '../config.js'
import type { Gateway } from '../gateway/gateway.js'
import type { Account } from '../store/accounts.js'
import type { Sessions } from './session.js'
import type { AttemptLimiter } from './attempts.js'

/** What every portal route needs. */
export interface PortalContext {
  gw: Gateway
  sessions: Sessions
  /** The chain id sign-in messages must name. */
  chainId: number
  /** Nonces per client address and minute. */
  signIns: AttemptLimiter
}

/** Local development chain (anvil, hardhat) when neither the portal nor a chain rail names one. */
const LOCAL_CHAIN_ID = 31337

export function signInChainId(config: Config): number {
  return config.portal?.chainId ?? (config.rail.kind === 'evm' ? config.rail.chainId : LOCAL_CHAIN_ID)
}

/** This portal's origin as the browser sees it: sign-in messages must name it. */
export function originOf(req: FastifyRequest): string {
  return `${req.protocol}://${req.host}`
}

/** Epoch milliseconds → the seconds the API's `created` fields carry. */
export const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000))

export async function accountOf(ctx: PortalContext, accountId: number): Promise<Account> {
  const account = await ctx.gw.store.accounts.byId(accountId)
  if (!account) throw new Error(`session names account ${accountId}, which is gone`)
  return account
}
