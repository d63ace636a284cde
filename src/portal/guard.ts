import type { FastifyInstance, FastifyRequest } from 'fastify'
import { apiError } from '../protocol/errors.js'
import { sendError } from '../api/errors.js'
import type { PortalSession } from '../store/portal.js'
import { sameToken, type Sessions } from './session.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A portal API route that needs no session (config, nonce, sign-in). */
    portalPublic?: boolean
  }
  interface FastifyRequest {
    portalSession: PortalSession | null
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])
export const CSRF_HEADER = 'x-csrf-token'

/** The signed-in session of a request that passed the guard. */
export function sessionOf(req: FastifyRequest): PortalSession {
  if (!req.portalSession) throw new Error('portal route without the session guard')
  return req.portalSession
}

/**
 * Every portal API request passes here before its route: API keys are refused, state changes must come from this
 * origin as JSON, routes other than sign-in need a live session, and state changes need the session's CSRF token.
 */
export function guardPortalApi(api: FastifyInstance, sessions: Sessions, configured: URL | undefined): void {
  api.decorateRequest('portalSession', null)
  api.addHook('onRequest', async (req, reply) => {
    reply.header('cache-control', 'no-store')
    if (req.headers.authorization !== undefined) {
      return sendError(
        reply,
        apiError(
          'session_required',
          'The portal API does not accept API keys (they are for /v1); sign in with your wallet.',
        ),
      )
    }
    const write = !SAFE_METHODS.has(req.method)
    if (write && !sameOrigin(req, configured)) {
      const here = configured ? ` (this portal is ${configured.origin}, its portal.origin)` : ''
      return sendError(reply, apiError('csrf_failed', `Refused a ${req.method} from another origin${here}.`))
    }
    // Cross-site forms cannot send JSON, so this also keeps sign-in itself from being posted by another site.
    if (
      (req.method === 'POST' || req.method === 'PATCH') &&
      !/^application\/json\b/i.test(req.headers['content-type'] ?? '')
    ) {
      return sendError(
        reply,
        apiError('csrf_failed', 'Portal API requests that change state must send Content-Type: application/json.'),
      )
    }
    if (req.routeOptions.config.portalPublic) return
    const session = await sessions.current(req)
    if (!session)
      return sendError(
        reply,
        apiError(
          'session_required',
          'Not signed in (no session, or it expired or was signed out). Sign in with your wallet.',
        ),
      )
    if (write && !sameToken(header(req, CSRF_HEADER), session.csrf)) {
      return sendError(
        reply,
        apiError(
          'csrf_failed',
          `Missing or wrong ${CSRF_HEADER} header; the token comes with the session (GET /portal/api/session).`,
        ),
      )
    }
    req.portalSession = session
  })
}

/**
 * Browsers send Origin on cross-origin and on all POST/DELETE requests; when present it must be this portal's:
 * `portal.origin` exactly (scheme and port included) when configured, whatever Host a proxy in front sends on;
 * otherwise the host the request names.
 */
function sameOrigin(req: FastifyRequest, configured: URL | undefined): boolean {
  const origin = req.headers.origin
  if (origin === undefined) return true
  if (configured) return origin === configured.origin
  try {
    return new URL(origin).host === req.host
  } catch {
    return false
  }
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name]
  return Array.isArray(v) ? v[0] : v
}
