import type { Catalog } from '../routing/catalog.js'
import type { Health } from '../routing/health.js'

/** What readiness reads: the store's own problems, and the offers and their breakers. */
export interface Readiness {
  store: { problems(): Promise<string[]> }
  catalog: Catalog
  health: Health
}

/** Why this process is not ready: the store's problems, and no offer live (every breaker open, or none at all). */
export async function readinessProblems({ store, catalog, health }: Readiness): Promise<string[]> {
  const problems = await store.problems()
  const offers = [...catalog.offers.values()].flat()
  if (catalog.managed) offers.push(catalog.managed)
  if (!offers.some((o) => health.breaker(o.key) !== 'open')) {
    problems.push(offers.length ? 'no offer is live: every breaker is open' : 'no offer is configured')
  }
  return problems
}
