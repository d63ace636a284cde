import type { FastifyReply } from 'fastify'
import { errorBody, statusOf, type ApiError } from '../protocol/errors.js'

/** Sends an error in the one body shape, with its status, request id and Retry-After where the code carries one. */
export function sendError(reply: FastifyReply, err: ApiError): FastifyReply {
  if (err.retryAfter !== undefined) reply.header('retry-after', String(err.retryAfter))
  return reply
    .code(statusOf(err))
    .header('content-type', 'application/json; charset=utf-8')
    .send(JSON.stringify(errorBody(err)))
}
