import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from '../ops/log.js'
import type { GatewayMetrics } from '../ops/metrics.js'
import { formatUsdc } from '../money/usdc.js'
import { errorCodeOf } from './errors.js'

declare module 'fastify' {
  interface FastifyReply {
    /** Observes a request whose client closed its response before it was whole: no onResponse runs for it. */
    observeAborted?: () => void
  }
}

/**
 * Every /v1 reply carries `Server-Timing` (the gateway's own time, and the upstreams' when one was called; a stream's
 * carries the gateway's time to its first byte), and every request ends in one access line and, for chat, its
 * metrics. Lines hold ids, codes, counts and times: never a key, a cookie or message text.
 */
export function observeRequests(app: FastifyInstance, logger: Logger, metrics: GatewayMetrics): void {
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
  // A response its client closed first has no onResponse: its route observes it once done (`observeAborted`).
  app.decorateReply('observeAborted', function (this: FastifyReply) {
    finished(this.request, this)
  })
  /** The request's metrics and access line. */
  const finished = (req: FastifyRequest, reply: FastifyReply) => {
    const totalMs = reply.elapsedTime
    const trace = req.trace
    if (trace?.observed) return
    if (trace) {
      trace.observed = true
      metrics.observe(trace, totalMs)
    }
    if (logger.isLevelEnabled('info')) {
      const line: Record<string, unknown> = {
        req_id: req.id,
        method: req.method,
        path: req.url.split('?')[0],
        status: reply.statusCode,
        code: errorCodeOf(reply) ?? trace?.outcome,
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
      logger.info(line, 'request')
    }
  }
}

const round = (ms: number) => Math.round(ms * 10) / 10
