import { openStore } from '../../src/store/open.js'
import type { Store } from '../../src/store/store.js'
import { SYSTEM_ACCOUNTS } from '../../src/store/accounts.js'
import type { UsageRecord } from '../../src/store/usage.js'
import { dropSchema, freshStoreUrl, type StoreKind } from './stores.js'

/** A fresh migrated store for the store's own tests: two users, a provider and the fee account, the clock at 1000. */
export interface StoreFixture {
  store: Store
  url: string
  user: number
  other: number
  payee: number
  fees: number
}

export async function openFixture(kind: StoreKind): Promise<StoreFixture> {
  const url = freshStoreUrl(kind)
  const store = await openStore(url, () => 1000)
  const id = async (address: string, kind: 'user' | 'provider') =>
    (await store.accounts.ensure(address, kind, 1000)).account.id
  return {
    store,
    url,
    user: await id('0x1111111111111111111111111111111111111111', 'user'),
    other: await id('0x3333333333333333333333333333333333333333', 'user'),
    payee: await id('0x2222222222222222222222222222222222222222', 'provider'),
    fees: (await store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!.id,
  }
}

export async function closeFixture(f: StoreFixture | undefined): Promise<void> {
  if (!f) return
  await f.store.close()
  if (!f.url.startsWith('sqlite:')) await dropSchema(f.url)
}

/** A completed request's usage record; `over` changes any field. */
export function usageRecord(
  requestId: string,
  accountId: number,
  cost: bigint,
  over: Partial<UsageRecord> = {},
): UsageRecord {
  return {
    requestId,
    accountId,
    keyId: 'key_1',
    model: 'svc/atlas@1',
    servedModel: 'svc/atlas@1',
    provider: '0xabc',
    stream: false,
    promptTokens: 10,
    completionTokens: 5,
    upstreamPromptTokens: null,
    upstreamCompletionTokens: null,
    cost,
    outcome: 'completed',
    latencyMs: 3,
    createdAt: 1000,
    ...over,
  }
}
