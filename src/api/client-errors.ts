import { maxHeaderSize, STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { ServerResponse } from 'node:http'
import { apiError, errorBody } from '../protocol/errors.js'
import { newRequestId } from '../ids/request-id.js'
import { answeredByNode } from './observe.js'

/** The access line of a refusal no request of the router saw (its head could not be read). */
export type RefusalLine = (line: { req_id: string; status: number; code: string; total_ms: number }) => void

/**
 * Node's refusals of a request it could not read: malformed HTTP, headers over Node's limit, or a request not received
 * whole within `requestTimeoutMs` (the tuning's). No route ran, so this answers in the one error shape with a request
 * id (the one its request was given when its head was read, else one of its own), then closes the connection (what
 * followed on it cannot be trusted). Each refusal has its access line: its request's, or `line`'s when it had none.
 */
export const clientErrorAnswer =
  (requestTimeoutMs: number, line: RefusalLine) =>
  (err: NodeJS.ErrnoException, socket: Socket): void => {
    // A reset connection has nothing left to answer; nor has one its client ended in the middle of a request (a
    // client that stops sending a body refused early, say): a request begun has its line from its own response.
    if (err.code === 'ECONNRESET' || socket.destroyed) return
    if (err.code === 'HPE_INVALID_EOF_STATE') return void socket.destroy()
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
    const [status, message] = refusal(err, requestTimeoutMs)
    const code = 'feature_not_supported'
    const known = current?.getHeader('x-request-id')
    const id = typeof known === 'string' ? known : newRequestId()
    if (socket.writable) {
      const body = JSON.stringify(errorBody(apiError(code, message, { param: null, status })))
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
          `x-request-id: ${id}\r\nconnection: close\r\n\r\n${body}`,
      )
    }
    if (current) answeredByNode.set(current as unknown as ServerResponse, { status, code })
    else line({ req_id: id, status, code, total_ms: 0 })
    socket.destroy()
  }

/** The response a connection is writing, as Node keeps it on the socket. */
interface OwedResponse {
  headersSent: boolean
  getHeader(name: string): unknown
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
