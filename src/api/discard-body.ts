import type { IncomingMessage } from 'node:http'
import type { FastifyReply } from 'fastify'

/** The most of a refused body read and thrown away before its connection is closed. */
export const DISCARD_LIMIT = 16 * 1024 * 1024

/**
 * A body refused before it was read whole (over the size limit) is read on and thrown away, so that its client, still
 * sending, is not reset before it reads the refusal. Up to `limit` bytes the connection stays open for its next
 * request; past them (or when the declared length is past them) it is closed.
 */
export function discardBody(req: IncomingMessage, reply: FastifyReply, limit = DISCARD_LIMIT): void {
  if (req.complete) return
  const declared = Number(req.headers['content-length'])
  if (!(declared > limit)) reply.removeHeader('connection')
  let seen = 0
  req.on('data', (chunk: Buffer) => {
    seen += chunk.length
    if (seen > limit) req.socket.destroy()
  })
  req.resume()
}
