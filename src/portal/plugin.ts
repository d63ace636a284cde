import { PORTAL_BODY_LIMIT, type AppPlugin } from '../api/app.js'
import { Sessions } from './session.js'
import { AttemptLimiter, DEFAULT_SIGN_INS_PER_MINUTE } from './attempts.js'
import { guardPortalApi } from './guard.js'
import { signInChainId, type PortalContext } from './context.js'
import { authRoutes } from './routes/auth.js'
import { keyRoutes } from './routes/keys.js'
import { walletRoutes } from './routes/wallet.js'
import { usageRoutes } from './routes/usage.js'
import { providerRoutes } from './routes/provider.js'
import { providerOfferRoutes } from './routes/provider-offers.js'
import { receiptDownloadRoutes } from './routes/receipts.js'
import { x402Routes } from './routes/x402.js'
import { providerAuditRoutes } from './routes/provider-audits.js'
import type { ReceiptBook } from '../receipts/book.js'
import { DEFAULT_WEB_ROOT, staticRoutes } from './static.js'

export interface PortalOptions {
  /** Directory of the built front end (default dist/web). */
  webRoot?: string
}

/**
 * The account portal: its page at /portal and its JSON API at /portal/api, behind a wallet sign-in session. Without a
 * receipt book it offers no receipt downloads.
 */
export function portalPlugin(opts: PortalOptions = {}, receipts?: ReceiptBook): AppPlugin {
  return async (app, gw) => {
    const ctx: PortalContext = {
      store: gw.store,
      keys: gw.keys,
      usage: gw.usage,
      catalog: gw.catalog,
      health: gw.health,
      rail: gw.config.rail,
      payees: gw.accounts.payees,
      now: gw.now,
      sessions: new Sessions(gw.store, gw.config.portal?.sessionSecret, gw.now, gw.config.portal?.origin),
      chainId: signInChainId(gw.config),
      signIns: new AttemptLimiter(gw.config.portal?.signInsPerMinute ?? DEFAULT_SIGN_INS_PER_MINUTE, gw.now),
      sessionAttempts: new AttemptLimiter(
        3 * (gw.config.portal?.signInsPerMinute ?? DEFAULT_SIGN_INS_PER_MINUTE),
        gw.now,
      ),
      origin: gw.config.portal?.origin === undefined ? undefined : new URL(gw.config.portal.origin),
    }
    await app.register(
      async (api) => {
        // Nothing the portal takes is large (a sign-in message is at most 4096 characters): the API's 4 MiB would let a
        // stranger, with no session yet, make the gateway hold or parse megabytes per connection.
        api.addHook('onRoute', (route) => void (route.bodyLimit ??= PORTAL_BODY_LIMIT))
        guardPortalApi(api, ctx.sessions, ctx.origin)
        authRoutes(api, ctx)
        keyRoutes(api, ctx)
        walletRoutes(api, ctx)
        usageRoutes(api, ctx)
        providerRoutes(api, ctx)
        providerOfferRoutes(api, ctx)
        providerAuditRoutes(api, ctx, receipts)
        if (receipts) receiptDownloadRoutes(api, receipts, ctx.store)
        x402Routes(api, ctx)
      },
      { prefix: '/portal/api' },
    )
    staticRoutes(app, opts.webRoot ?? DEFAULT_WEB_ROOT)
  }
}
