import { depositTo, openAccount } from '../../src/accounts/operations.js'
import type { Config } from '../../src/config-schema.js'
import type { Fault } from '../../src/providers/simulated/faults.js'
import type { Offer } from '../../src/routing/catalog.js'
import { P, type Market } from './market.js'

/**
 * The test market's audits: atlas@1's dear offer serves the cheap one's model and is its reference; audits run only
 * when a test asks (`intervalMs: 0`), paid by `wallet`.
 */
export function auditedAtlas(c: Config, wallet: string): void {
  c.providers.find((p) => p.address === P.atlasDear)!.offers[0]!.upstreamModel = 'atlas'
  c.audit = { wallet, references: { 'svc/atlas@1': P.atlasDear }, intervalMs: 0 }
}

/** Funds the audit account of `wallet` (deposit and approved cap); its account id. */
export async function fundAuditor(m: Market, wallet: string, funds: bigint): Promise<number> {
  const { account } = await openAccount(m.store, wallet, Date.now())
  await depositTo(m.store, account.id, funds, Date.now())
  await m.store.accounts.approve(account.id, funds)
  return account.id
}

/** The market's offer of atlas@1 by `provider`, as the gateway routes it now. */
export const atlasOffer = (m: Market, provider: string): Offer =>
  m.server.gateway.catalog.offers.get('svc/atlas@1')!.find((o) => o.provider === provider)!

/** Runs `run` with the cheap atlas provider under `fault`, cleared after. */
export async function cheating<T>(m: Market, fault: Fault, run: () => Promise<T>): Promise<T> {
  m.sims.atlasCheap.setFault(fault)
  try {
    return await run()
  } finally {
    m.sims.atlasCheap.setFault({ kind: 'none' })
  }
}
