import type { FastifyReply } from 'fastify'
import { errorBody, statusOf, type ApiError } from '../protocol/errors.js'
import { anthropicError } from './anthropic-body.js'

/** The error code each refused reply was sent with, for its access line. */
const codes = new WeakMap<FastifyReply, string>()

/**
 * Sends an error in the one body shape, with its status, request id and Retry-After where the code carries one; on
 * Anthropic's Messages API (`/v1/messages`) in Anthropic's shape, whatever stage refused it.
 */
export function sendError(reply: FastifyReply, err: ApiError): FastifyReply {
  codes.set(reply, err.code)
  if (err.retryAfter !== undefined) reply.header('retry-after', String(err.retryAfter))
  const req = reply.request
  const body = isMessagesApi(req.url) ? anthropicError(err, String(req.id)) : errorBody(err)
  return reply.code(statusOf(err)).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body))
}

/** Whether a request's URL is Anthropic's Messages API. */
export function isMessagesApi(url: string): boolean {
  return url === '/v1/messages' || url.startsWith('/v1/messages?') || url.startsWith('/v1/messages/')
}

/** The code of the error a reply was sent with, if it was one. */
export function errorCodeOf(reply: FastifyReply): string | undefined {
  return codes.get(reply)
}
