import { maxHeaderSize, STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import { apiError, errorBody } from '../protocol/errors.js'
import { newRequestId } from './request-id.js'

/** How long a client may take to send a whole request (headers and body); a stream's reply is not bounded by it. */
export const REQUEST_TIMEOUT_MS = 60_000

/**
 * Node's refusals of a request it could not read: malformed HTTP, headers over Node's limit, or a request not received
 * whole within REQUEST_TIMEOUT_MS. No route ran, so this answers in the one error shape with a request id of its own,
 * then closes the connection (what followed on it cannot be trusted).
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has nothing left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  // As Node does: a response already under way on this connection (a pipelined request after it) is not interrupted
  // by another; the connection just closes.
  const current = (socket as Socket & { _httpMessage?: { headersSent: boolean } })._httpMessage
  if (socket.writable && !current?.headersSent) {
    const [status, message] = refusal(err)
    const body = JSON.stringify(errorBody(apiError('feature_not_supported', message, { param: null, status })))
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `x-request-id: ${newRequestId()}\r\nconnection: close\r\n\r\n${body}`,
    )
  }
  socket.destroy()
}

function refusal(err: NodeJS.ErrnoException): [number, string] {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, `The request was not received whole within ${REQUEST_TIMEOUT_MS / 1000} s.`]
  if (err.code === 'HPE_HEADER_OVERFLOW') return [431, `The request's headers are larger than ${maxHeaderSize / 1024} KiB.`]
  const reason = (err as { reason?: string }).reason
  return [400, `The request is not valid HTTP/1.1${reason ? ` (${reason})` : ''}.`]
}
