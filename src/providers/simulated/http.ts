// Node http helpers of the simulated upstream.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'

/** Waits `ms` unless the client goes away first; false when it did. */
export async function pause(ms: number, res: ServerResponse): Promise<boolean> {
  if (ms <= 0) return true
  const gone = new AbortController()
  const onClose = () => gone.abort()
  res.once('close', onClose)
  try {
    await sleep(ms, undefined, { signal: gone.signal })
    return true
  } catch {
    return false
  } finally {
    res.off('close', onClose)
  }
}

/** Resolves once `res` can take more, or is closed. */
export function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
  res.end(text)
}

export async function readBody(req: IncomingMessage): Promise<string> {
  let text = ''
  req.setEncoding('utf8')
  for await (const chunk of req) text += chunk
  return text
}
