import type { Offer } from '../routing/catalog.js'
import type { ModelSource } from './model-list.js'

const WINDOWS = { '5m': 300_000, '1h': 3_600_000, '1d': 86_400_000 } as const

const isoOrNull = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/** What the audits found of an offer: its state, the last day's audits, when it was last audited and since when. */
function verificationView(catalog: ModelSource['catalog'], key: string) {
  const v = catalog.verificationOf(key)
  return {
    state: v.state,
    reference: catalog.references.has(key),
    audits_1d: { passed: v.passed, failed: v.failed },
    last_audit_at: isoOrNull(v.lastAuditAt),
    since: isoOrNull(v.since),
  }
}

/** Rounded to `digits` decimals; null stays null. */
const round = (v: number | null, digits: number) => (v === null ? null : Number(v.toFixed(digits)))

/**
 * GET /v1/models/{id}/endpoints: every offer of the model (of svc/cortex@1: of its candidates, and its vendor) with its
 * prices, its model's context window and output bound, its status (`live`, `probing`: its breaker half-open, `down`:
 * open; `full` when at its concurrency) and what this gateway process measured of it: time to first token and
 * throughput (medians of the last hour) and uptime (successful attempts over the last 5 minutes, hour and day; null
 * with no attempt), and the last day's checks of its delivered replies (`OfferChecks`). Undefined for a model that does
 * not exist.
 */
export function endpointsOf({ catalog, health }: ModelSource, id: string) {
  const named = catalog.models.get(id)
  const ids = named ? [id] : catalog.isCortex(id) ? (catalog.cortex?.candidates ?? []) : undefined
  if (!ids) return undefined
  const offers: Offer[] = ids.flatMap((m) => catalog.offers.get(m) ?? [])
  if (!named && catalog.managed) offers.push(catalog.managed)
  const data = offers.map((o) => {
    const model = catalog.models.get(o.modelId)
    const breaker = health.breaker(o.key)
    const { ttftMs, tps } = health.stats.medians(o.key)
    return {
      object: 'endpoint',
      model: o.modelId,
      provider: o.provider,
      input_price_per_mtok: o.prices.input.toString(),
      output_price_per_mtok: o.prices.output.toString(),
      context_length: model?.contextLimit ?? (Number.isFinite(catalog.managedContext) ? catalog.managedContext : null),
      max_output_tokens: model?.capabilities.maxOutputTokens ?? catalog.cortex?.capabilities.maxOutputTokens ?? null,
      status:
        breaker === 'open'
          ? 'down'
          : breaker === 'half-open'
            ? 'probing'
            : health.inflight(o.key) >= o.maxConcurrency
              ? 'full'
              : 'live',
      ttft_p50_ms: round(ttftMs, 1),
      throughput_p50_tps: round(tps, 1),
      uptime: Object.fromEntries(
        Object.entries(WINDOWS).map(([name, ms]) => [name, round(health.stats.uptime(o.key, ms), 4)]),
      ),
      checks: health.checks.summary(o.key),
      verification: verificationView(catalog, o.key),
    }
  })
  return { object: 'list', model: id, data }
}
