import type { FastifyInstance } from 'fastify'

/**
 * `GET /healthz`: the process answers. `GET /readyz`: the store answers and has run every migration, and at least one
 * offer is live (its breaker not open), in every worker of the server; otherwise 503 naming what is wrong. Neither
 * takes a key: a load balancer asks.
 */
export function healthRoutes(app: FastifyInstance, readiness: () => Promise<string[]>): void {
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_req, reply) => {
    const problems = await readiness()
    if (problems.length) return reply.code(503).send({ status: 'unready', problems })
    return { status: 'ready' }
  })
}
