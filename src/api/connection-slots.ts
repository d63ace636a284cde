import type { Server } from 'node:http'
import type { Socket } from 'node:net'

export interface ConnectionBounds {
  /** Connections open at once. */
  max: number
  /** How long a new connection may stay silent (no request head) before it is closed. */
  headTimeoutMs: number
}

/**
 * Bounds the server's open connections. A connection past `max` is admitted by closing the oldest one that has not
 * sent a request yet (idle connections cannot lock new clients out); when every open connection has sent one, the new
 * connection is closed instead. A connection that sends no request head within `headTimeoutMs` is closed.
 */
export function boundConnections(server: Server, { max, headTimeoutMs }: ConnectionBounds): void {
  /** Connections that have not sent a request head yet, oldest first, with when they opened. */
  const silent = new Map<Socket, number>()
  let open = 0
  server.on('connection', (socket: Socket) => {
    open++
    socket.once('close', () => {
      open--
      silent.delete(socket)
    })
    if (open > max) {
      const oldest = silent.keys().next().value
      if (oldest === undefined) return void socket.destroy()
      silent.delete(oldest)
      oldest.destroy()
    }
    silent.set(socket, Date.now())
  })
  server.on('request', (req: { socket: Socket }) => void silent.delete(req.socket))
  const sweep = setInterval(
    () => {
      const before = Date.now() - headTimeoutMs
      for (const [socket, openedAt] of silent) {
        if (openedAt > before) break
        silent.delete(socket)
        socket.destroy()
      }
    },
    Math.min(1_000, headTimeoutMs),
  )
  sweep.unref()
  server.once('close', () => clearInterval(sweep))
}
