import type { Config } from '../../src/config-schema.js'
import { Catalog } from '../../src/routing/catalog.js'
import { Health } from '../../src/routing/health.js'
import { prepare } from '../../src/gateway/prepare.js'
import { maxCostOf } from '../../src/gateway/admission.js'
import { isApiError } from '../../src/protocol/errors.js'
import type { Store } from '../../src/store/store.js'
import { SYSTEM_ACCOUNTS } from '../../src/store/accounts.js'
import { depositTo, issueKey, openAccount } from '../../src/accounts/operations.js'

/** An account of `wallet` funded and approved for `amount`, and a key of it named `name`. */
export async function fundedKey(store: Store, wallet: string, amount: bigint, name = 'funded') {
  const { account } = await openAccount(store, wallet, Date.now())
  await depositTo(store, account.id, amount, Date.now())
  await store.accounts.approve(account.id, amount)
  return { accountId: account.id, key: (await issueKey({ now: Date.now(), store, accountId: account.id, name })).key }
}

/** The hold a request body gets under this config, computed by the gateway's own functions. */
export function maxCostFor(config: Config, body: unknown): bigint {
  const catalog = new Catalog(config, () => ({ stream: async function* () {}, close: async () => {} }))
  const p = prepare(body, catalog, new Health({ failures: 3, cooldownMs: 1000 }))
  if (p instanceof Promise) throw new Error('a prompt this long is counted over several turns: give a shorter one')
  if (isApiError(p)) throw new Error(p.message)
  return maxCostOf(p)
}

/**
 * The money invariants after any run: postings net to zero per ref, caches match postings, no open holds, deposits =
 * balance + captures.
 */
export async function checkInvariants(
  store: Store,
  accountId: number,
  deposited: bigint,
): Promise<{ captured: bigint }> {
  const audit = await store.ledger.audit()
  if (audit.unbalanced.length)
    throw new Error(
      `unbalanced refs: ${JSON.stringify(audit.unbalanced.slice(0, 3), (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`,
    )
  if (audit.inconsistent.length)
    throw new Error(`inconsistent accounts: ${audit.inconsistent.map((a) => a.address).join(', ')}`)
  const account = (await store.accounts.byId(accountId))!
  const usage = await store.usage.list(accountId, { limit: 100_000 })
  const captured = usage.reduce((s, u) => s + u.cost, 0n)
  if (account.balance < 0n) throw new Error(`negative balance ${account.balance}`)
  if (deposited !== account.balance + captured)
    throw new Error(`deposits ${deposited} != balance ${account.balance} + captures ${captured}`)
  const fees = (await store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!
  void fees
  return { captured }
}
