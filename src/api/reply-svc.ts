import { receiptId } from '../receipts/typed-data.js'
import type { ReplySvc } from '../protocol/chat.js'
import { formatUsdc } from '../money/usdc.js'
import { routingStatus, type Delivered } from '../gateway/charge.js'
import type { Admitted } from '../gateway/context.js'
import type { Offer } from '../routing/catalog.js'

/** svc object of a delivered reply (of either API); the routing description on cortex replies. */
export function svcOf(r: Admitted, d: Delivered): ReplySvc {
  const provider = d.reply.offer.provider
  const svc: ReplySvc = {
    cost_usdc: formatUsdc(d.cost),
    provider,
    request_id: r.requestId,
    receipt_id: receiptId(r.requestId),
  }
  if (r.prepared.plan.cortex) {
    const status = routingStatus(d)
    svc.routing = { model: d.servedModel, served_by: provider, vendor_fallback: d.reply.offer.managed, status }
  }
  return svc
}

/** Who served, as system_fingerprint says it: `<bundle>:<profile>`, or `cortex:<model>` for a routed reply. */
export function fingerprintFor(r: Admitted): (offer: Offer) => string {
  return r.prepared.plan.cortex ? (offer) => `cortex:${offer.modelId}` : (offer) => offer.fingerprint
}
