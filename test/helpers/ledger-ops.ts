import BetterSqlite3 from 'better-sqlite3'
import type { Store } from '../../src/store/store.js'
import { usageRecord } from './store-fixture.js'

export interface LedgerIds {
  user: number
  other: number
  payee: number
  fees: number
}

/**
 * The ledger operations the SQLite hot-ledger tests drive: a hold of 100, its capture at 40 (fee 2), both at once, and
 * a hold row's status read from another connection. `current` gives the test's accounts and store URL as they are now.
 */
export function ledgerOps(current: () => { ids: LedgerIds; url: string }) {
  const hold = (s: Store, requestId: string, accountId = current().ids.user) =>
    s.ledger.hold({
      requestId,
      accountId,
      keyId: 'key_1',
      model: 'svc/atlas@1',
      amount: 100n,
      owner: 'i1',
      now: 1000,
      expiresAt: 10_000,
    })
  const capture = (s: Store, requestId: string, accountId = current().ids.user) =>
    s.ledger.capture({
      requestId,
      cost: 40n,
      payeeId: current().ids.payee,
      fee: 2n,
      feeAccountId: current().ids.fees,
      now: 1000,
      usage: usageRecord(requestId, accountId, 40n),
    })
  const serve = async (s: Store, requestId: string, accountId = current().ids.user) => {
    const held = await hold(s, requestId, accountId)
    if (!held.ok) throw new Error(`hold refused: ${held.reason}`)
    return capture(s, requestId, accountId)
  }
  const status = (requestId: string) => {
    const other = new BetterSqlite3(current().url.slice('sqlite:'.length), { readonly: true })
    try {
      const row = other.prepare('SELECT status FROM holds WHERE request_id = ?').pluck().get(requestId)
      return (row as string | undefined) ?? null
    } finally {
      other.close()
    }
  }
  return { hold, capture, serve, status }
}
