import { maxHeaderSize, STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import { apiError, errorBody } from '../protocol/errors.js'
import { newRequestId } from '../ids/request-id.js'

/**
 * Node's refusals of a request it could not read: malformed HTTP, headers over Node's limit, or a request not received
 * whole within `requestTimeoutMs` (the tuning's). No route ran, so this answers in the one error shape with a request
 * id of its own, then closes the connection (what followed on it cannot be trusted).
 */
export const clientErrorAnswer =
  (requestTimeoutMs: number) =>
  (err: NodeJS.ErrnoException, socket: Socket): void => {
    // A reset connection has nothing left to answer.
    if (err.code === 'ECONNRESET' || socket.destroyed) return
    const current = (socket as Socket & { _httpMessage?: OwedResponse })._httpMessage
    // A response owed to an earlier request on this connection (the refused bytes are a pipelined request after it):
    // a refusal now would be read as that response. It is sent whole, then the connection closes, the refused bytes
    // unanswered. The response of the request being read (its body malformed or late) is this refusal's own.
    if (current && (current.headersSent || current.req?.complete)) {
      if (!current.headersSent) current.shouldKeepAlive = false
      socket.pause()
      current.once('close', () => socket.destroy())
      return
    }
    if (socket.writable) {
      const [status, message] = refusal(err, requestTimeoutMs)
      const body = JSON.stringify(errorBody(apiError('feature_not_supported', message, { param: null, status })))
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
          `x-request-id: ${newRequestId()}\r\nconnection: close\r\n\r\n${body}`,
      )
    }
    socket.destroy()
  }

/** The response a connection is writing, as Node keeps it on the socket. */
interface OwedResponse {
  headersSent: boolean
  shouldKeepAlive: boolean
  req?: { complete: boolean }
  once(event: 'close', listener: () => void): unknown
}

function refusal(err: NodeJS.ErrnoException, requestTimeoutMs: number): [number, string] {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return [408, `The request was not received whole within ${requestTimeoutMs / 1000} s.`]
  if (err.code === 'HPE_HEADER_OVERFLOW')
    return [431, `The request's headers are larger than ${maxHeaderSize / 1024} KiB.`]
  const reason = (err as { reason?: string }).reason
  return [400, `The request is not valid HTTP/1.1${reason ? ` (${reason})` : ''}.`]
}
