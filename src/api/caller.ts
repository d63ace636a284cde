import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { isApiError, type ApiError } from '../protocol/errors.js'
import type { Caller } from '../auth/caller.js'
import type { KeyVerifier } from '../auth/verifier.js'
import type { IncomingMessage } from 'node:http'
import { sendError } from './errors.js'
import type { Intake, Ticket } from './intake.js'
import type { RequestTrace } from '../gateway/trace.js'
import { KEYLESS } from '../gateway/x402-payment.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The API key's owner, set by the key check of /v1 routes that take a key. */
    caller: Caller | null
    /** What the key check took in for this request (chat's), until its body is read and its response closes. */
    intake: Ticket | null
    /** What a chat request's access line and metrics say of it. */
    trace: RequestTrace | null
    /** Sent without a key to a route that takes x402 payments: `caller` is `KEYLESS` until it paid. */
    keyless?: true
  }
}

/** The key check of a /v1 route, an onRequest hook. */
export type KeyCheck = (req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

/**
 * /v1 requests that sent `Expect: 100-continue` and are not yet invited to send their body (app.ts): the key check
 * does.
 */
export const awaitingContinue = new WeakSet<IncomingMessage>()

/**
 * The key check of /v1 routes, an onRequest hook run before the body is read: a missing or unknown key is refused
 * without parsing (up to 4 MiB of) JSON for a stranger; `intake`, for chat, takes the request in there too. A callback
 * hook: a cached key (nearly every request) is answered in the same call, without a promise and a hook runner's turn.
 */
export function keyCheck(
  keys: KeyVerifier,
  intake?: Intake,
  opts: { keyless?: boolean; apiKeyHeader?: boolean } = {},
): KeyCheck {
  return (req, reply, done) => {
    // Anthropic's clients send the key as `x-api-key`; a Bearer key is taken there too.
    const apiKey = opts.apiKeyHeader ? req.headers['x-api-key'] : undefined
    const authorization = req.headers.authorization ?? (typeof apiKey === 'string' ? `Bearer ${apiKey}` : undefined)
    const admit = (caller: Caller | ApiError) => {
      // A reply sent from a callback hook ends the request's lifecycle: done is not called.
      if (isApiError(caller)) return void sendError(reply, caller)
      // A client that left during a key lookup closed its response before a listener could hear it: nothing to take.
      if (intake && !reply.raw.destroyed) {
        const ticket = intake.enter(caller.accountId, req.headers['content-length'])
        if (isApiError(ticket)) return void sendError(reply, ticket)
        // Closed when answered, or when the client left: a request refused before its handler ran is given back too.
        reply.raw.once('close', () => intake.leave(ticket))
        req.intake = ticket
      }
      req.caller = caller
      // `Expect: 100-continue` (app.ts): the body is invited only now that the key is known.
      if (req.headers.expect !== undefined && awaitingContinue.delete(req.raw)) reply.raw.writeContinue()
      done()
    }
    // No key where x402 is taken: the request pays for itself (docs/architecture.md §4a); all such share one intake.
    if (opts.keyless && authorization === undefined) {
      req.keyless = true
      return admit(KEYLESS)
    }
    const caller = keys.verify(authorization)
    if (!(caller instanceof Promise)) return admit(caller)
    // A failure past the lookup (the store's, or the refusal's own) goes to Fastify's error path, as from a hook.
    caller.then(admit, done).catch(done)
  }
}

/** The caller of a route behind `keyCheck`. */
export function callerOf(req: FastifyRequest): Caller {
  if (!req.caller) throw new Error('key route without the key check')
  return req.caller
}
