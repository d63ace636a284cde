import type { FastifyInstance } from 'fastify'
import { apiError, isApiError } from '../../protocol/errors.js'
import { sendError } from '../../api/errors.js'
import { openAccount } from '../../accounts/operations.js'
import type { Account } from '../../store/accounts.js'
import type { PortalSession } from '../../store/portal.js'
import { issueNonce, verifySignIn } from '../siwe.js'
import { sessionOf } from '../guard.js'
import { accountOf, isProvider, portalOrigin, seconds, type PortalContext } from '../context.js'

const STATEMENT = 'Sign in to the svc marketplace account portal.'

/** `provider`: the wallet is a provider here (`isProvider`), whatever its account's kind. */
function sessionView(s: PortalSession, a: Account, provider: boolean) {
  return {
    object: 'portal.session',
    address: s.address,
    kind: a.kind,
    provider,
    status: a.status,
    csrf_token: s.csrf,
    expires_at: seconds(s.expiresAt),
  }
}

/** What the sign-in page needs before a session, and the session itself: nonce, sign in, who am I, sign out. */
export function authRoutes(api: FastifyInstance, ctx: PortalContext): void {
  const { store, now, rail } = ctx

  api.get('/config', { config: { portalPublic: true } }, async () => ({
    object: 'portal.config',
    chain_id: ctx.chainId,
    rail:
      rail.kind === 'evm'
        ? { kind: rail.kind, chain_id: rail.chainId, usdc: rail.usdc, spender: rail.settler }
        : { kind: rail.kind },
    // A key kept in the browser is only acceptable where money is not real.
    local_test_wallet: rail.kind === 'local',
  }))

  const tooMany = (wait: number) =>
    apiError('sign_in_failed', `Too many sign-in attempts from this address; try again in ${wait} s.`, {
      status: 429,
      retryAfter: wait,
    })

  api.post('/nonce', { config: { portalPublic: true } }, async (req, reply) => {
    const wait = ctx.signIns.take(req.ip)
    if (wait !== null) return sendError(reply, tooMany(wait))
    const { nonce, expiresAt } = await issueNonce(store, now())
    const { host, origin } = portalOrigin(ctx.origin, req)
    return {
      object: 'portal.nonce',
      nonce,
      expires_at: seconds(expiresAt),
      domain: host,
      uri: `${origin}/portal`,
      chain_id: ctx.chainId,
      version: '1',
      statement: STATEMENT,
    }
  })

  api.post('/session', { config: { portalPublic: true } }, async (req, reply) => {
    // Each attempt costs a signature check and a write: one address may not make them without bound either.
    const wait = ctx.sessionAttempts.take(req.ip)
    if (wait !== null) return sendError(reply, tooMany(wait))
    const { host, origin } = portalOrigin(ctx.origin, req)
    const signedIn = await verifySignIn(store, req.body, { domain: host, origin, chainId: ctx.chainId, now: now() })
    if (isApiError(signedIn)) return sendError(reply, signedIn)
    const { account } = await openAccount(store, signedIn.address, now())
    const session = await ctx.sessions.start(req, reply, account.id, account.address)
    return sessionView(session, account, isProvider(ctx, account))
  })

  api.get('/session', async (req) => {
    const session = sessionOf(req)
    const account = await accountOf(ctx, session.accountId)
    return sessionView(session, account, isProvider(ctx, account))
  })

  api.delete('/session', async (req, reply) => {
    await ctx.sessions.end(req, reply, sessionOf(req))
    return { object: 'portal.session', signed_out: true }
  })
}
