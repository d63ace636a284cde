import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface MetricsListen {
  host?: string
  port?: number
}

/** Where metrics are served unless the config says otherwise. */
export const METRICS_DEFAULTS = { host: '127.0.0.1', port: 9464 }

/**
 * `GET /metrics` in Prometheus's text format, on a listener of its own (kept off the API's port and its load). A port
 * already taken is told to `onError` and the gateway serves on without metrics: undefined then.
 */
export async function serveMetrics(
  registry: { metrics(): Promise<string>; contentType: string },
  listen: MetricsListen,
  onError: (err: Error) => void,
): Promise<{ url: string; close(): Promise<void> } | undefined> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('GET /metrics\n')
      return
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err.message}\n`),
    )
  })
  const host = listen.host ?? METRICS_DEFAULTS.host
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(listen.port ?? METRICS_DEFAULTS.port, host, resolve)
    })
  } catch (err) {
    onError(err as Error)
    return undefined
  }
  const { address, port, family } = server.address() as AddressInfo
  return {
    url: `http://${family === 'IPv6' ? `[${address}]` : address}:${port}/metrics`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}
