import type { FastifyInstance, FastifyRequest } from 'fastify'
import { apiError, type ApiError } from '../../protocol/errors.js'
import { formatUsdc } from '../../money/usdc.js'
import { prepaidAddress } from '../../store/x402.js'
import type { Store } from '../../store/store.js'
import { sessionOf } from '../guard.js'
import type { PortalContext } from '../context.js'

/**
 * The account a portal request reads: the signed-in wallet's own, or with `?account=x402` the prepaid account its x402
 * payments opened (docs/architecture.md §4a), so its usage and receipts are the wallet's to see.
 */
export async function viewedAccount(req: FastifyRequest, store: Store): Promise<number | ApiError> {
  const session = sessionOf(req)
  const which = (req.query as Record<string, unknown> | undefined)?.account
  if (which === undefined) return session.accountId
  if (which !== 'x402')
    return apiError('feature_not_supported', "account must be x402 (the wallet's prepaid account) or absent.", {
      param: 'account',
    })
  const prepaid = await store.accounts.byAddress(prepaidAddress(session.address))
  if (!prepaid)
    return apiError('feature_not_supported', `The wallet ${session.address} has not paid with x402.`, {
      param: 'account',
      status: 404,
    })
  return prepaid.id
}

/** The query without `account`, which `viewedAccount` has read. */
export function withoutAccount(query: Record<string, string | undefined>): Record<string, string | undefined> {
  const { account: _, ...rest } = query
  return rest
}

/** GET /portal/api/x402: the signed-in wallet's x402 payments and what its prepaid account holds for it. */
export function x402Routes(api: FastifyInstance, ctx: PortalContext): void {
  api.get('/x402', async (req) => {
    const { address } = sessionOf(req)
    const prepaid = await ctx.store.accounts.byAddress(prepaidAddress(address))
    if (!prepaid) return { object: 'portal.x402', account: null, payments: [] }
    const payments = await ctx.store.x402.payments(address)
    return {
      object: 'portal.x402',
      account: {
        address: prepaid.address,
        // Held by requests in flight, and the rest, which the next settlement batch returns to the wallet.
        held_usdc: formatUsdc(prepaid.held),
        to_return_usdc: formatUsdc(prepaid.balance - prepaid.held),
      },
      payments: payments.map((p) => ({
        request_id: p.requestId,
        amount_usdc: formatUsdc(p.amount),
        status: p.status,
        tx_hash: p.txHash,
        created: Math.floor(p.createdAt / 1000),
      })),
    }
  })
}
