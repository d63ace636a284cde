import type { FastifyInstance } from 'fastify'
import { apiError } from '../../protocol/errors.js'
import { sendError } from '../../api/errors.js'
import { formatUsdc } from '../../money/usdc.js'
import { sessionOf } from '../guard.js'
import { accountOf, isProvider, seconds, type PortalContext } from '../context.js'
import { auditFinding } from '../../audit/finding.js'

/**
 * What the audits found of one of the provider's offers: its state, the last day's audits, and for a suspect or
 * quarantined one why (its newest failed audit) and what is held back from settlement.
 */
async function verificationOf(ctx: PortalContext, key: string, provider: string, model: string) {
  const v = ctx.catalog.verificationOf(key)
  const [failed] =
    v.state === 'suspect' || v.state === 'quarantined'
      ? await ctx.store.audits.list({ provider, model, result: 'failed', limit: 1 })
      : []
  const held = await ctx.store.heldEarnings.open(provider, model)
  const amount = held ? await ctx.store.heldEarnings.amount(held) : undefined
  return {
    state: v.state,
    reference: ctx.catalog.references.has(key),
    audits_1d: { passed: v.passed, failed: v.failed },
    last_failed: failed
      ? {
          audit_id: failed.id,
          created: seconds(failed.createdAt),
          reason: failed.reason,
          finding: auditFinding(failed),
        }
      : null,
    held_usdc: amount ? formatUsdc(amount.total) : null,
  }
}

/**
 * For provider wallets: their offers as routed now, requests served, what they earned, and payouts settled and pending.
 */
export function providerRoutes(api: FastifyInstance, ctx: PortalContext): void {
  const { store, catalog, health } = ctx

  api.get('/provider', async (req, reply) => {
    const account = await accountOf(ctx, sessionOf(req).accountId)
    if (!isProvider(ctx, account) && (await store.providers.endpoints(account.id)).length === 0) {
      return sendError(
        reply,
        apiError('feature_not_supported', 'This wallet is not a provider of this marketplace.', {
          param: null,
          status: 404,
        }),
      )
    }
    const mine = account.address.toLowerCase()
    const offers = await Promise.all(
      [...catalog.offers.values()]
        .flat()
        .filter((o) => o.provider.toLowerCase() === mine)
        .map(async (o) => ({
          model: o.modelId,
          input_price_per_mtok: String(o.prices.input),
          output_price_per_mtok: String(o.prices.output),
          max_concurrency: o.maxConcurrency,
          fingerprint: o.fingerprint,
          breaker: health.breaker(o.key),
          inflight: health.inflight(o.key),
          verification: await verificationOf(ctx, o.key, o.provider, o.modelId),
        })),
    )
    const [earnings, totals, batches] = await Promise.all([
      store.settlement.payeeEarnings(account.id),
      store.settlement.payeeTotals(account.id),
      store.settlement.payeeBatches(account.id),
    ])
    return {
      object: 'portal.provider',
      address: account.address,
      offers,
      requests_served: earnings.requests,
      charged_usdc: formatUsdc(earnings.gross),
      earned_usdc: formatUsdc(earnings.earned),
      pending_usdc: formatUsdc(totals.pending),
      settled_usdc: formatUsdc(totals.settled),
      payouts: batches.map((b) => ({
        batch_id: b.id,
        status: b.status,
        amount_usdc: formatUsdc(b.amount),
        created: seconds(b.createdAt),
        settled: seconds(b.settledAt),
        tx_hash: b.txHash,
      })),
    }
  })
}
