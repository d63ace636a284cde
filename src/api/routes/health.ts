import type { FastifyInstance } from 'fastify'
import type { Catalog } from '../../routing/catalog.js'
import type { Health } from '../../routing/health.js'

export interface Readiness {
  store: { problems(): Promise<string[]> }
  catalog: Catalog
  health: Health
}

/**
 * `GET /healthz`: the process answers. `GET /readyz`: the store answers and has run every migration, and at least one
 * offer is live (its breaker not open); otherwise 503 naming what is wrong. Neither takes a key: a load balancer asks.
 */
export function healthRoutes(app: FastifyInstance, { store, catalog, health }: Readiness): void {
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_req, reply) => {
    const problems = await store.problems()
    const offers = [...catalog.offers.values()].flat()
    if (catalog.managed) offers.push(catalog.managed)
    if (!offers.some((o) => health.breaker(o.key) !== 'open')) {
      problems.push(offers.length ? 'no offer is live: every breaker is open' : 'no offer is configured')
    }
    if (problems.length) return reply.code(503).send({ status: 'unready', problems })
    return { status: 'ready' }
  })
}
