import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Address } from 'viem'
import { issueKey, openAccount } from '../src/accounts/operations.js'
import { approveSettler } from '../src/chain/deploy.js'
import { P, type Market } from './helpers/market.js'
import {
  askAtlas,
  balanceOf,
  evmRail,
  hasAnvil,
  newPayer,
  startChainMarket,
  until,
  USDC,
  type Chain,
  type ChainMarket,
  type Payer,
} from './helpers/chain.js'

/**
 * Spending follows the wallet: allowance changes reach admission through the watcher; uncollectable charges become
 * debt.
 */
describe.skipIf(!hasAnvil)('allowance, admission and debt on chain (anvil)', () => {
  let c: Chain
  let m: Market
  let alice: Payer
  let bob: Payer
  let bobKey: string
  let bobId: number
  let env: ChainMarket | undefined

  beforeEach(async () => {
    env = await startChainMarket()
    ;({ c, m, payer: alice } = env)
    bob = await newPayer(c, 5n * USDC, 4n * USDC)
    bobId = (await openAccount(m.store, bob.address, Date.now())).account.id
    bobKey = (await issueKey({ now: Date.now(), store: m.store, accountId: bobId, name: 'bob' })).key
    await evmRail(m).watcher.syncNow()
  })
  afterEach(() => env?.close())

  const ask = (key: string) => askAtlas(m, key)
  const account = async (id: number) => (await m.store.accounts.byId(id))!

  it('records the debt of a payer who revoked the allowance, settles the others, and refuses the payer until covered', async () => {
    for (const key of [m.key, bobKey, m.key]) expect((await ask(key)).status).toBe(200)
    const aliceOwes = 5n * USDC - (await account(m.accountId)).balance
    const provider = (await m.store.accounts.byAddress(P.atlasCheap))!.id
    expect(aliceOwes).toBeGreaterThan(0n)

    // Alice revokes the approval before settlement: her transfers will fail on chain.
    await approveSettler({ client: c.client, payer: alice.wallet, usdc: c.usdc, settler: c.settler, amount: 0n })
    const report = await m.server.settler.runOnce()
    expect(report.batches).toHaveLength(1)
    expect(report.batches[0]!.failedPayers).toEqual([m.accountId])
    // Between a batch's block and its confirmation a read may count it twice (the safe side): read again now.
    await evmRail(m).watcher.syncNow()

    expect((await account(m.accountId)).debt).toBe(aliceOwes)
    expect(await balanceOf(c, alice.address)).toBe(5n * USDC)
    expect(await balanceOf(c, bob.address)).toBe(5n * USDC - (5n * USDC - (await account(bobId)).balance))
    // The provider got Bob's share on chain; Alice's share stays pending in the ledger.
    const books = await m.store.accounts.books(provider)
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(books.available)
    expect(books.pending).toBeGreaterThan(0n)

    const refused = await ask(m.key)
    expect(refused.status).toBe(402)
    const body = await refused.json()
    expect(body.error.code).toBe('insufficient_quota')
    expect(body.error.message).toMatch(/owes/)
    expect((await ask(bobKey)).status).toBe(200)

    // Alice approves again: the watcher sees her wallet cover what she owes, the debt is lifted and collected.
    await approveSettler({ client: c.client, payer: alice.wallet, usdc: c.usdc, settler: c.settler, amount: 4n * USDC })
    await evmRail(m).watcher.syncNow()
    expect((await account(m.accountId)).debt).toBe(0n)
    const second = await m.server.settler.runOnce()
    expect(second.batches.every((b) => b.failedPayers.length === 0)).toBe(true)
    await evmRail(m).watcher.syncNow()
    const after = await m.store.accounts.books(provider)
    expect(after.pending).toBe(0n)
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(after.available)
    expect(await balanceOf(c, alice.address)).toBe((await account(m.accountId)).balance)
    expect((await ask(m.key)).status).toBe(200)
    const audit = await m.store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
    expect(audit.inconsistent).toEqual([])
  })

  it('admits against an allowance change within a few blocks, and never reads the chain per request', async () => {
    // A cap too small for the request's maximum cost (400 tokens at the highest atlas price ≈ 0.00032 USDC).
    const small = await approveSettler({
      client: c.client,
      payer: alice.wallet,
      usdc: c.usdc,
      settler: c.settler,
      amount: 100n,
    })
    await until(
      () => account(m.accountId),
      (a) => a.cap === 100n,
    )
    expect(evmRail(m).watcher.block! - small).toBeLessThanOrEqual(3n)
    expect((await ask(m.key)).status).toBe(402)

    const raised = await approveSettler({
      client: c.client,
      payer: alice.wallet,
      usdc: c.usdc,
      settler: c.settler,
      amount: 4n * USDC,
    })
    await until(
      () => account(m.accountId),
      (a) => a.cap === 4n * USDC,
    )
    expect(evmRail(m).watcher.block! - raised).toBeLessThanOrEqual(3n)
    expect((await ask(m.key)).status).toBe(200)

    // An allowance lowered to what is already owed (captured, not yet settled) leaves nothing to spend.
    const owed = 5n * USDC - (await account(m.accountId)).balance
    const lowered = await approveSettler({
      client: c.client,
      payer: alice.wallet,
      usdc: c.usdc,
      settler: c.settler,
      amount: owed,
    })
    await until(
      () => account(m.accountId),
      (a) => a.cap === 0n,
    )
    expect(evmRail(m).watcher.block! - lowered).toBeLessThanOrEqual(3n)
    const refused = await ask(m.key)
    expect(refused.status).toBe(402)
    expect((await refused.json()).error.code).toBe('insufficient_quota')

    // Admission is a store operation: with the chain gone, an approved wallet is still served.
    await approveSettler({ client: c.client, payer: alice.wallet, usdc: c.usdc, settler: c.settler, amount: 4n * USDC })
    await until(
      () => account(m.accountId),
      (a) => a.cap > 0n,
    )
    await c.close()
    expect((await ask(m.key)).status).toBe(200)
  })
})
