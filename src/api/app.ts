import { maxHeaderSize } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { apiError, type ApiError } from '../protocol/errors.js'
import type { Gateway } from '../gateway/gateway.js'
import { sendError } from './errors.js'
import { newRequestId } from '../ids/request-id.js'
import { clientErrorAnswer } from './client-errors.js'
import { awaitingContinue, keyCheck } from './caller.js'
import { Intake } from './intake.js'
import { discardBody } from './discard-body.js'
import { bodyDigest } from './body-digest.js'
import { boundConnections } from './connection-slots.js'
import { observeRequests } from './observe.js'
import { healthRoutes } from './routes/health.js'
import { chatRoutes } from './routes/chat.js'
import { responsesRoutes } from './routes/responses.js'
import { embeddingsRoutes } from './routes/embeddings.js'
import { messagesRoutes } from './routes/messages.js'
import { openApiDocument } from './openapi.js'
import { internalError } from '../gateway/refusals.js'
import { modelRoutes } from './routes/models.js'
import { usageRoutes } from './routes/usage.js'
import { receiptRoutes } from './routes/receipts.js'
import type { ReceiptBook } from '../receipts/book.js'
import { keyLimitsOf } from '../usage/key-limits.js'

/** The largest request body of the API (/v1); the portal's API takes less (`PORTAL_BODY_LIMIT`). */
export const BODY_LIMIT = 4 * 1024 * 1024
/**
 * The largest request body of the portal's API: nothing it takes is large (a sign-in message is at most 4096
 * characters).
 */
export const PORTAL_BODY_LIMIT = 64 * 1024

const NO_HOST = apiError('feature_not_supported', 'The request has no Host header, which HTTP/1.1 requires.', {
  param: null,
  status: 400,
})
// No store keeps a NUL in its text (Postgres refuses one): a path or query parameter holding one names nothing.
const NUL_IN_URL = apiError('feature_not_supported', 'The URL holds a NUL character (%00), which no parameter may.', {
  param: null,
  status: 400,
})
const STOPPING = apiError(
  'no_capacity',
  'This gateway is stopping and takes no new requests; ' +
    'retry after 1 s (another instance, or this one restarted, will take it).',
  { retryAfter: 1 },
)

export interface AppPlugin {
  (app: FastifyInstance, gw: Gateway): void | Promise<void>
}

/** The HTTP application: one error shape everywhere, a request id on every response. */
/** The routes each app registered (method and path as Fastify has them): what the OpenAPI document must name. */
const registered = new WeakMap<FastifyInstance, { method: string; url: string }[]>()
export const routesOf = (app: FastifyInstance) => registered.get(app) ?? []

/** The API's version, as the OpenAPI document states it. */
const API_VERSION = '1'

export async function buildApp(
  gw: Gateway,
  receipts: ReceiptBook,
  plugins: AppPlugin[] = [],
): Promise<FastifyInstance> {
  const { requestTimeoutMs } = gw.tuning
  const app = Fastify({
    logger: false,
    bodyLimit: BODY_LIMIT,
    genReqId: newRequestId,
    requestIdHeader: false,
    // Stopping: idle connections closed, requests in flight left to finish (the server's close cuts them after the
    // tuning's shutdownGraceMs), new ones refused by the hook below in the one error shape (Fastify's own 503 is not).
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // What Node cannot read as a request (malformed HTTP, oversized headers, a body that never ends) is answered in the
    // same error shape, with a request id; a request must arrive whole within the tuning's requestTimeoutMs.
    clientErrorHandler: clientErrorAnswer(requestTimeoutMs, (line) => gw.logger.info(line, 'request')),
    requestTimeout: requestTimeoutMs,
    http: {
      // Node would refuse an HTTP/1.1 request without a Host header itself, bare and without a request id: the hook
      // below refuses it in the one error shape.
      requireHostHeader: false,
      // How often Node looks for requests past their time (30 s by default, so a 408 came up to 30 s late).
      connectionsCheckingInterval: Math.min(1_000, requestTimeoutMs),
      // A request's head (and a new connection's first one) must arrive within headTimeoutMs, unless the whole request
      // has less: a request timeout under the headers' is never enforced.
      headersTimeout: Math.min(gw.tuning.headTimeoutMs, requestTimeoutMs),
    },
    // A path parameter as long as the headers allow reaches its route (and its key check) instead of a 414.
    routerOptions: { maxParamLength: maxHeaderSize },
    // Behind a reverse proxy: client addresses (the portal's sign-in limit) and https (Secure cookies) come from it.
    trustProxy: trustedProxies(gw.config.listen?.trustProxy),
    // A malformed URL is answered before routing: same error shape, same request id.
    frameworkErrors: (err, req, reply) => {
      reply.header('x-request-id', req.id)
      if (req.headers.origin !== undefined && isApi(req.url)) allowAnyOrigin(reply)
      void sendError(
        reply,
        clientError(err) ?? apiError('feature_not_supported', err.message, { param: null, status: 400 }),
      )
    },
  })
  const routes: { method: string; url: string }[] = []
  registered.set(app, routes)
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) routes.push({ method, url: r.url })
  })

  // Connections cost a file descriptor each, and one sending a large body slowly holds what it sent: they are bounded,
  // and past the bound the oldest that sent nothing yet makes room for a new one.
  boundConnections(app.server, { max: gw.tuning.maxConnections, headTimeoutMs: gw.tuning.headTimeoutMs })

  // `Expect: 100-continue` (HTTP/1.1; Node raises this only then): Node would invite the body before any check. The
  // /v1 routes that take a key invite it once the key is known (a stranger gets its 401 without uploading up to
  // 4 MiB, `keyCheck`); others at once.
  app.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (isApi(req.url ?? '')) awaitingContinue.add(req)
    else res.writeContinue()
    app.server.emit('request', req, res)
  })

  app.decorateRequest('caller', null)
  app.decorateRequest('intake', null)
  app.decorateRequest('trace', null)
  app.decorateRequest('bodySha256', null)
  // First, so that every request is observed, those the hook below answers too.
  observeRequests(app, gw.logger, gw.metrics)

  // A callback hook: an async one would cost every request a promise and a turn of the hook runner.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id)
    if (req.headers.origin !== undefined && isApi(req.url)) allowAnyOrigin(reply)
    // A GET's answer carries the CORS headers only when asked with an Origin: a shared cache must keep the two apart.
    if ((req.method === 'GET' || req.method === 'HEAD') && isApi(req.url)) reply.header('vary', 'origin')
    if (req.headers.host === undefined && req.raw.httpVersionMinor === 1) return void sendError(reply, NO_HOST)
    if (req.url.includes('%00')) return void sendError(reply, NUL_IN_URL)
    if (req.method === 'OPTIONS' && reply.hasHeader('access-control-allow-origin')) return void preflight(req, reply)
    if (gw.stopping) return void sendError(reply.header('connection', 'close'), STOPPING)
    done()
  })

  // Accept JSON whatever the content type says (curl -d sends form encoding), and refuse non-JSON clearly.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (req, body, done) => {
    const encoding = req.headers['content-encoding']
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
      const e = new Error(
        `The request body is encoded (Content-Encoding: ${encoding}); send it uncompressed.`,
      ) as FastifyError
      e.code = 'SVC_ENCODED_BODY'
      e.statusCode = 415
      return done(e, undefined)
    }
    req.bodySha256 = bodyDigest(body as string)
    // A byte-order mark (Windows editors, PowerShell) is no part of the JSON (RFC 8259 §8.1).
    const text = (body as string).charCodeAt(0) === 0xfeff ? (body as string).slice(1) : (body as string)
    if (text.trim() === '') return done(null, undefined)
    try {
      done(null, JSON.parse(text))
    } catch (err) {
      const e = new Error(`The request body is not valid JSON: ${(err as Error).message}`) as FastifyError
      e.code = 'SVC_INVALID_JSON'
      e.statusCode = 400
      done(e, undefined)
    }
  })

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const client = clientError(err, req.headers['content-type'])
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') discardBody(req.raw, reply)
    if (client) return sendError(reply, client)
    gw.log(`unexpected error on ${req.method} ${req.url} (${req.id})`, err)
    return sendError(reply, internalError(req.id))
  })

  app.setNotFoundHandler((req, reply) => {
    sendError(
      reply,
      apiError('feature_not_supported', `Unknown endpoint ${req.method} ${req.url.split('?')[0]}.`, {
        param: null,
        status: 404,
      }),
    )
  })

  healthRoutes(app, () => gw.readiness())
  const document = JSON.stringify(openApiDocument(API_VERSION))
  app.get('/v1/openapi.json', (_req, reply) => {
    void reply.header('content-type', 'application/json; charset=utf-8').send(document)
  })
  const { maxRequestsPerAccount: perAccount, maxBodyBytesInFlight: bodyBytes } = gw.tuning
  const intake = new Intake({ perAccount, bodyBytes, bodyLimit: BODY_LIMIT })
  modelRoutes(app, gw, gw.now)
  const chatKeyCheck = keyCheck(gw.keys, intake, { keyless: gw.takesX402 })
  chatRoutes(app, { pipeline: gw.pipeline, tuning: gw.tuning, keyCheck: chatKeyCheck, intake })
  responsesRoutes(app, { responses: gw.responses, tuning: gw.tuning, keyCheck: chatKeyCheck, intake })
  embeddingsRoutes(app, { embeddings: gw.embeddings, keyCheck: chatKeyCheck, intake })
  const messagesKeyCheck = keyCheck(gw.keys, intake, { keyless: gw.takesX402, apiKeyHeader: true })
  messagesRoutes(app, { pipeline: gw.pipeline, tuning: gw.tuning, keyCheck: messagesKeyCheck, intake })
  const keyLimits = (accountId: number) => keyLimitsOf(gw.store.keys, gw.rates, accountId, gw.now())
  usageRoutes(app, { usage: gw.usage, keyLimits, receipts }, keyCheck(gw.keys))
  receiptRoutes(app, receipts, keyCheck(gw.keys))
  for (const plugin of plugins) await plugin(app, gw)
  return app
}

/** What a client did wrong, as the one error shape (413 for an oversized body); null for our own failures. */
function clientError(err: FastifyError, contentType?: string): ApiError | null {
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return apiError(
      'feature_not_supported',
      `The request body is larger than this endpoint takes (${BODY_LIMIT / 1024 / 1024} MiB on /v1, ` +
        `${PORTAL_BODY_LIMIT / 1024} KiB on the portal's API).`,
      { param: null, status: 413 },
    )
  }
  // Any media type is read as JSON, but a Content-Type header that is no media type at all cannot be read.
  if (err.code === 'SVC_ENCODED_BODY')
    return apiError('feature_not_supported', err.message, { param: null, status: 415 })
  if (err.statusCode === 415) {
    return apiError(
      'feature_not_supported',
      `The Content-Type header ${JSON.stringify(contentType ?? '')} is not a media type; ` +
        'send Content-Type: application/json.',
      { param: null, status: 415 },
    )
  }
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500)
    return apiError('feature_not_supported', err.message, { param: null, status: err.statusCode })
  return null
}

/**
 * `trustProxy: true` is one proxy in front: the gateway's peer, whose X-Forwarded-Proto and last X-Forwarded-For entry
 * (the address it saw) are believed, and nothing further left, which the client wrote (Fastify's own `true` believes
 * every entry, so a client could pick its own address). Addresses name the proxies to believe, hop by hop.
 */
export function trustedProxies(
  setting: boolean | string | undefined,
): string | ((address: string, hop: number) => boolean) | false {
  if (setting === true) return (_address, hop) => hop === 0
  return setting || false
}

/** Requests of the API (/v1), whose answers any web page may read; a request target may also be in absolute form. */
function isApi(url: string): boolean {
  if (url.startsWith('/')) return url.startsWith('/v1/')
  try {
    return new URL(url).pathname.startsWith('/v1/')
  } catch {
    return false
  }
}

/** The API takes bearer keys, never cookies: any web page may call it with its user's key (as OpenAI's does). */
function allowAnyOrigin(reply: FastifyReply): void {
  reply
    .header('access-control-allow-origin', '*')
    .header('access-control-expose-headers', 'x-request-id, retry-after, payment-required, payment-response')
}

/**
 * A browser's preflight of a /v1 request: allowed for every origin and the headers it asks for (the key travels in
 * Authorization, never in a cookie).
 */
function preflight(req: FastifyRequest, reply: FastifyReply): void {
  reply
    .code(204)
    .header('vary', 'origin, access-control-request-headers')
    .header('access-control-allow-methods', 'GET, POST, OPTIONS')
    .header(
      'access-control-allow-headers',
      req.headers['access-control-request-headers'] ?? 'authorization, content-type',
    )
    .header('access-control-max-age', '86400')
    .send()
}
