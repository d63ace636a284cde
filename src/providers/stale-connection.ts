import { ReplyBroken } from './plain-exchange.js'

/**
 * Errors of a request whose connection the upstream closed under it: a kept-alive connection it had closed as the
 * request went out on it (undici's `UND_ERR_SOCKET` "other side closed", a reset, a broken pipe).
 */
const CLOSED = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE'])

/** Whether a request failed on a connection the upstream had closed, before any byte of a reply came back. */
export function closedBeforeReply(err: unknown): boolean {
  if (err instanceof ReplyBroken) return false
  const e = err as { code?: string; cause?: { code?: string } } | null
  const code = e?.code ?? e?.cause?.code
  return code !== undefined && CLOSED.has(code)
}
