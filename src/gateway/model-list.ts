import { CORTEX_MODEL_ID, type WireModel, type WireModelList, type WirePricing } from '../protocol/models.js'
import type { Health } from '../routing/health.js'
import { lowestLive } from '../routing/plan.js'
import { ceilingOf } from '../routing/route.js'
import type { Catalog, Offer } from '../routing/catalog.js'

/** What the model list reads: the catalog, and the offers' health for live prices. */
export interface ModelSource {
  catalog: Catalog
  health: Health
}

/**
 * The model list (docs/interface.md §2.1, §4.2): every configured model with its lowest live offer, then svc/cortex@1
 * with ceiling prices.
 */
export function modelList({ catalog, health }: ModelSource, created: number): WireModelList {
  const data: WireModel[] = []
  for (const m of catalog.models.values()) {
    const best = lowestLive(catalog.offers.get(m.id) ?? [], health)
    data.push({
      id: m.id,
      object: 'model',
      created: m.created ?? created,
      owned_by: m.owned_by,
      svc: {
        contextLimit: m.contextLimit,
        capabilities: m.capabilities,
        ...(m.capabilities.tools && m.tool_contract ? { tool_contract: m.tool_contract } : {}),
        ...(best
          ? {
              pricing: {
                input_price_per_mtok: best.prices.input.toString(),
                output_price_per_mtok: best.prices.output.toString(),
              },
            }
          : {}),
      },
    })
  }
  const cortex = catalog.cortex
  if (cortex) {
    // The candidates' live offers, and the vendor whenever there is one: admission prices every cortex request with it
    // (its breaker may close before the request reaches it), so a ceiling without it could be passed.
    const live: Offer[] = cortex.candidates.flatMap((c) =>
      (catalog.offers.get(c) ?? []).filter((o) => health.breaker(o.key) !== 'open'),
    )
    const vendorLive = catalog.managed !== undefined && health.breaker(catalog.managed.key) !== 'open'
    let pricing: WirePricing | undefined
    if (live.length || vendorLive) {
      const { input, output } = ceilingOf(catalog.managed ? [...live, catalog.managed] : live)
      pricing = { input_price_per_mtok: input.toString(), output_price_per_mtok: output.toString(), basis: 'ceiling' }
    }
    data.push({
      id: CORTEX_MODEL_ID,
      object: 'model',
      created,
      owned_by: 'svc',
      svc: {
        cortex: true,
        candidates: cortex.candidates,
        contextLimit: cortex.contextLimit,
        capabilities: cortex.capabilities,
        ...(cortex.tool_contract ? { tool_contract: cortex.tool_contract } : {}),
        ...(pricing ? { pricing } : {}),
      },
    })
  }
  return { object: 'list', data }
}
