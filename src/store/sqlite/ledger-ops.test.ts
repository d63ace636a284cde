import { afterEach, describe, expect, it } from 'vitest'
import BetterSqlite3 from 'better-sqlite3'
import { openStore } from '../open.js'
import { sqliteLedgerOps, type LedgerOp } from './ledger-ops.js'
import { OpenHolds } from '../ledger/open-holds.js'
import { freshSqliteUrl } from '../../../test/helpers/stores.js'

/**
 * A connection whose transactions count their runs: a group that had to be replayed runs once per operation, plus once.
 */
function counted(raw: BetterSqlite3.Database) {
  const runs = { n: 0 }
  const db = new Proxy(raw, {
    get(target, key) {
      if (key === 'transaction') {
        return (fn: (...a: never[]) => unknown) => {
          const tx = target.transaction(fn)
          return { immediate: (...a: never[]) => (runs.n++, tx.immediate(...a)) }
        }
      }
      const value = Reflect.get(target, key) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return { db, runs }
}

describe("the SQLite ledger's group", () => {
  let raw: BetterSqlite3.Database | undefined
  afterEach(() => raw?.close())

  it('runs in one transaction when the sum of its holds is past what the store can hold', async () => {
    const url = freshSqliteUrl()
    const store = await openStore(url, () => 1000)
    const { id } = (await store.accounts.ensure('0x1111111111111111111111111111111111111111', 'user', 1000)).account
    await store.accounts.deposit({ id, amount: 1000n, ref: 'dep', now: 1000 })
    await store.accounts.approve(id, 1000n)
    await store.close()
    raw = new BetterSqlite3(url.slice('sqlite:'.length))
    raw.defaultSafeIntegers(true)
    const { db, runs } = counted(raw)
    const ops = sqliteLedgerOps(db, new OpenHolds())
    const hold = (requestId: string, amount: bigint): LedgerOp => ({
      kind: 'hold',
      hold: { requestId, accountId: id, keyId: 'k', model: 'm', amount, owner: 'i1', now: 1000, expiresAt: 10_000 },
    })
    const half = 2n ** 62n + 1n
    const outcomes = ops.runGroup([hold('x', half), hold('y', half), hold('z', 10n), hold('w', 20n)])
    expect(outcomes.map((o) => o.ok && (o.value as { ok: boolean }).ok)).toEqual([false, false, true, true])
    expect(runs.n).toBe(1)
    expect(raw.prepare('SELECT held FROM accounts WHERE id = ?').pluck().get(id)).toBe(30n)
  })
})
