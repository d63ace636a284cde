import { readFile } from 'node:fs/promises'
import { extname, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { apiError } from '../protocol/errors.js'
import { sendError } from '../api/errors.js'

/** Where `npm run build` puts the bundled front end (web/portal → dist/web), from src/portal or dist/portal alike. */
export const DEFAULT_WEB_ROOT = fileURLToPath(new URL('../../dist/web', import.meta.url))

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
}

// Everything the page loads comes from this origin; no inline script, no framing.
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

/**
 * Serves the built portal at /portal: files by path, index.html for the page itself; hashed assets are cached for good.
 */
export function staticRoutes(app: FastifyInstance, webRoot: string): void {
  const root = resolve(webRoot)
  const cache = new Map<string, Buffer>()

  const load = async (path: string): Promise<Buffer | undefined> => {
    let body = cache.get(path)
    if (!body) {
      body = await readFile(path).catch(() => undefined)
      if (body) cache.set(path, body)
    }
    return body
  }

  /** Sends the file at `rel` of the web root; false when there is none (its reply left to the caller). */
  const send = async (reply: FastifyReply, rel: string): Promise<boolean> => {
    const path = resolve(root, rel)
    if (path !== root && !path.startsWith(root + sep)) return false
    const body = await load(path)
    if (!body) return false
    const ext = extname(path)
    reply.header('content-type', TYPES[ext] ?? 'application/octet-stream').header('x-content-type-options', 'nosniff')
    if (ext === '.html')
      reply
        .header('content-security-policy', CSP)
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-cache')
    else if (rel.startsWith('assets/')) reply.header('cache-control', 'public, max-age=31536000, immutable')
    void reply.send(body)
    return true
  }

  const page = async (reply: FastifyReply) => {
    if (await send(reply, 'index.html')) return reply
    return reply
      .code(503)
      .header('content-type', 'text/plain; charset=utf-8')
      .send('The portal front end is not built; run npm run build.\n')
  }

  app.get('/portal', (_req, reply) => page(reply))
  app.get<{ Params: { '*': string } }>('/portal/*', async (req, reply) => {
    const rel = req.params['*']
    if (rel.startsWith('api/')) {
      return sendError(
        reply,
        apiError('feature_not_supported', `Unknown endpoint ${req.method} ${req.url.split('?')[0]}.`, {
          param: null,
          status: 404,
        }),
      )
    }
    if (rel === '' || rel === 'index.html') return page(reply)
    if (await send(reply, rel)) return reply
    return sendError(
      reply,
      apiError('feature_not_supported', `No such file /portal/${rel}.`, { param: null, status: 404 }),
    )
  })
}
