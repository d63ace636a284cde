import type { FastifyInstance, FastifyReply } from 'fastify'
import { apiError } from '../../protocol/errors.js'
import { sendError } from '../../api/errors.js'
import { approveCap, depositTo, OperationError } from '../../accounts/operations.js'
import { formatUsdc, parseUsdc } from '../../money/usdc.js'
import { spendableOf, type Account } from '../../store/accounts.js'
import { sessionOf } from '../guard.js'
import { accountOf, type PortalContext } from '../context.js'

/**
 * Test USDC one deposit on the local rail may add; the local rail's money is not real, but numbers should stay sane.
 */
const MAX_DEPOSIT = parseUsdc('10000')!
const MAX_CAP = parseUsdc('1000000')!

function walletView(a: Account) {
  return {
    object: 'portal.wallet',
    address: a.address,
    kind: a.kind,
    status: a.status,
    balance: formatUsdc(a.balance),
    cap: formatUsdc(a.cap),
    held: formatUsdc(a.held),
    spendable: formatUsdc(spendableOf(a)),
    debt: formatUsdc(a.debt),
  }
}

/** Balance, approved spending cap, held and spendable; on the local rail also deposit and change the cap. */
export function walletRoutes(api: FastifyInstance, ctx: PortalContext): void {
  const { store, now, rail } = ctx
  const local = rail.kind === 'local'

  /** The amount of a request body, or the refusal already sent. */
  const amountOf = (body: unknown, min: bigint, max: bigint, reply: FastifyReply): bigint | undefined => {
    const text = (body as { amount?: unknown } | undefined)?.amount
    const amount = typeof text === 'string' ? parseUsdc(text) : null
    if (amount === null || amount < min || amount > max) {
      const range = `from ${formatUsdc(min)} to ${formatUsdc(max)}`
      sendError(
        reply,
        apiError('feature_not_supported', `amount must be a USDC decimal string ${range}, e.g. "12.5".`, {
          param: 'amount',
        }),
      )
      return undefined
    }
    return amount
  }
  const chainOnly = (reply: FastifyReply, what: string) =>
    sendError(
      reply,
      apiError(
        'feature_not_supported',
        `On the ${rail.kind} rail ${what} on chain, from the wallet; the portal shows what to approve.`,
        { param: null },
      ),
    )

  api.get('/wallet', async (req) => {
    const account = await accountOf(ctx, sessionOf(req).accountId)
    if (rail.kind !== 'evm') return walletView(account)
    // On a chain rail: the wallet as the chain watcher last read it, and what is owed to settlement (viem loads
    // lazily).
    const { walletOnChain } = await import('../../chain/status.js')
    return { ...walletView(account), chain: await walletOnChain(rail, store, account.id) }
  })

  api.post('/wallet/deposit', async (req, reply) => {
    if (!local) return chainOnly(reply, 'deposits are made')
    const amount = amountOf(req.body, 1n, MAX_DEPOSIT, reply)
    if (amount === undefined) return reply
    try {
      return walletView(await depositTo(store, sessionOf(req).accountId, amount, now()))
    } catch (err) {
      if (!(err instanceof OperationError)) throw err
      return sendError(reply, apiError('feature_not_supported', `${err.message}.`, { param: 'amount' }))
    }
  })

  api.post('/wallet/cap', async (req, reply) => {
    if (!local) return chainOnly(reply, 'the spending cap is the USDC allowance, set')
    const amount = amountOf(req.body, 0n, MAX_CAP, reply)
    if (amount === undefined) return reply
    const { accountId } = sessionOf(req)
    await approveCap(store, accountId, amount)
    return walletView(await accountOf(ctx, accountId))
  })
}
