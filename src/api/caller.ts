import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { isApiError } from '../protocol/errors.js'
import type { Caller } from '../gateway/admission.js'
import type { Gateway } from '../gateway/gateway.js'
import { sendError } from './errors.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The API key's owner, set by the key check of /v1 routes that take a key. */
    caller: Caller | null
  }
}

/**
 * The key check of /v1 routes, as an onRequest hook: it runs before the body is read, so a missing or unknown key
 * is refused without parsing (up to 4 MiB of) JSON for a stranger.
 */
export function keyCheck(app: FastifyInstance, gw: Gateway) {
  app.decorateRequest('caller', null)
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const caller = await gw.keys.verify(req.headers.authorization)
    if (isApiError(caller)) return sendError(reply, caller)
    req.caller = caller
  }
}

/** The caller of a route behind `keyCheck`. */
export function callerOf(req: FastifyRequest): Caller {
  if (!req.caller) throw new Error('key route without the key check')
  return req.caller
}
