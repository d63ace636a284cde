import type { ServerResponse } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from '../ops/log.js'
import type { GatewayMetrics } from '../ops/metrics.js'
import { formatUsdc } from '../money/usdc.js'
import { errorCodeOf } from './errors.js'

/** The status an access line gives a request whose client closed its connection before any response went out. */
export const CLIENT_CLOSED_STATUS = 499

/**
 * Responses of requests Node could not read whole (a body that came late or malformed), which Node's refusal answered
 * in their stead (`clientErrorAnswer`): their access line says so.
 */
export const answeredByNode = new WeakMap<ServerResponse, { status: number; code: string }>()

/**
 * Every /v1 reply carries `Server-Timing` (the gateway's own time, and the upstreams' when one was called; a stream's
 * is set as its headers go, `SseWire`), and every request ends in exactly one access line and, for chat, its metrics,
 * whichever way it ends: answered, refused, or cut by its client. Lines hold ids, codes, counts and times: never a
 * key, a cookie or message text.
 */
export function observeRequests(app: FastifyInstance, logger: Logger, metrics: GatewayMetrics): void {
  // Registered before every other onRequest hook, so that a request they answer themselves is watched too.
  app.addHook('onRequest', (req, reply, done) => {
    // A response its client closed first has no onResponse. While the gateway still serves its request (a trace
    // underway), the route observes it once done (`observeGone`), when the line can say what it was charged.
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished && !req.trace?.underway) finished(req, reply)
    })
    done()
  })
  app.addHook('onSend', (req, reply, payload, done) => {
    if (req.url.startsWith('/v1/')) {
      const total = reply.elapsedTime
      const upstream = req.trace?.upstreamMs
      const own = `gateway;dur=${(upstream === undefined ? total : Math.max(0, total - upstream)).toFixed(1)}`
      reply.header('server-timing', upstream === undefined ? own : `${own}, upstream;dur=${upstream.toFixed(1)}`)
    }
    done(null, payload)
  })
  app.addHook('onResponse', (req, reply, done) => {
    finished(req, reply)
    done()
  })
  app.decorateReply('observeAborted', function (this: FastifyReply) {
    finished(this.request, this)
  })
  const observed = new WeakSet<FastifyRequest>()
  /** The request's metrics and access line, once. */
  const finished = (req: FastifyRequest, reply: FastifyReply) => {
    if (observed.has(req)) return
    observed.add(req)
    const totalMs = reply.elapsedTime
    const trace = req.trace
    if (trace) metrics.observe(trace, totalMs)
    if (logger.isLevelEnabled('info')) logger.info(accessLine(req, reply, totalMs), 'request')
  }
}

declare module 'fastify' {
  interface FastifyReply {
    /** Observes a request whose client closed its response before it was whole, once the gateway is done with it. */
    observeAborted?: () => void
  }
}

function accessLine(req: FastifyRequest, reply: FastifyReply, totalMs: number): Record<string, unknown> {
  const trace = req.trace
  const raw = reply.raw
  const byNode = answeredByNode.get(raw)
  // Cut by its client: the status that went out, if one did; else none did.
  const cut = !raw.writableFinished && !byNode
  const status = byNode?.status ?? (cut && !raw.headersSent ? CLIENT_CLOSED_STATUS : reply.statusCode)
  const line: Record<string, unknown> = {
    req_id: req.id,
    method: req.method,
    path: req.url.split('?')[0],
    status,
    code: byNode?.code ?? errorCodeOf(reply) ?? trace?.outcome ?? (cut ? 'client_closed' : undefined),
    wallet: req.caller?.address,
    key_id: req.caller?.keyId,
    total_ms: round(totalMs),
  }
  if (trace) {
    Object.assign(line, {
      model: trace.model,
      routing: trace.routing,
      provider: trace.provider,
      outcome: trace.outcome,
      prompt_tokens: trace.promptTokens,
      completion_tokens: trace.completionTokens,
      cost_usdc: trace.cost === undefined ? undefined : formatUsdc(trace.cost),
      attempts: trace.attempts,
      ttfb_ms: round(trace.ttfbMs ?? totalMs),
      upstream_ms: trace.upstreamMs === undefined ? undefined : round(trace.upstreamMs),
      gateway_ms: round(Math.max(0, totalMs - (trace.upstreamMs ?? 0))),
    })
  }
  return line
}

const round = (ms: number) => Math.round(ms * 10) / 10
