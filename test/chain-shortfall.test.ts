import { afterEach, describe, expect, it } from 'vitest'
import type { Address } from 'viem'
import { mintUsdc } from '../src/chain/deploy.js'
import { parseUsdc } from '../src/money/usdc.js'
import { spendableOf } from '../src/store/accounts.js'
import { P } from './helpers/market.js'
import {
  askAtlas,
  balanceOf,
  evmRail,
  FEE_ADDRESS,
  hasAnvil,
  sendUsdc,
  startChainMarket,
  USDC,
  type ChainMarket,
} from './helpers/chain.js'

/** Where the payer moves their USDC: any address that is not an account of the market. */
const ELSEWHERE = '0x000000000000000000000000000000000000bEEF' as Address

/**
 * A payer empties their wallet while a request of theirs runs: the request is still served and captured, the ledger
 * stays sound (nothing negative), no new request is admitted, settlement turns what it cannot collect into debt, and
 * once the wallet is refilled the charge is collected once and the account works again.
 */
describe.skipIf(!hasAnvil)('a wallet emptied under a request in flight (anvil)', () => {
  let env: ChainMarket | undefined
  afterEach(() => env?.close())

  it('captures it without a negative balance, refuses the payer until the wallet covers it, and collects once', async () => {
    // Timeouts far beyond the test, so the stalled request waits for the test and not for a failover.
    env = await startChainMarket({ firstByteTimeoutMs: 60_000, replyTimeoutMs: 60_000 })
    const { c, m, payer } = env
    const account = async () => (await m.store.accounts.byId(m.accountId))!
    const audit = async () => {
      const a = await m.store.ledger.audit()
      expect(a.unbalanced).toEqual([])
      expect(a.inconsistent).toEqual([])
    }
    const start = await balanceOf(c, payer.address)

    m.sims.atlasCheap.setFault({ kind: 'stall' })
    const pending = askAtlas(m, m.key)
    await expect.poll(() => m.sims.atlasCheap.stats.active).toBe(1)
    const held = (await account()).held
    expect(held).toBeGreaterThan(0n)

    // All but 50 base units leave the wallet: less than the request will cost.
    await sendUsdc(c, payer, ELSEWHERE, start - 50n)
    await evmRail(m).watcher.syncNow()
    expect(spendableOf(await account())).toBe(0n)
    expect((await askAtlas(m, m.key)).status).toBe(402)

    m.sims.atlasCheap.setFault({ kind: 'none' })
    const served = await pending
    expect(served.status).toBe(200)
    const cost = parseUsdc((await served.json()).svc.cost_usdc)!
    expect(cost).toBeGreaterThan(50n)
    await audit()
    expect((await account()).held).toBe(0n)
    const refused = await askAtlas(m, m.key)
    expect(refused.status).toBe(402)
    expect((await refused.json()).error.code).toBe('insufficient_quota')

    // No token moved since: the watcher reads nothing new, and what the hold did not use stays unspendable.
    await evmRail(m).watcher.syncNow()
    expect(spendableOf(await account())).toBe(0n)

    // Settlement cannot collect the charge from a wallet of 50: it becomes the payer's debt.
    const report = await m.server.settler.runOnce()
    expect(report.batches.map((b) => b.failedPayers)).toEqual([[m.accountId]])
    await evmRail(m).watcher.syncNow()
    expect(await account()).toMatchObject({ balance: 0n, held: 0n, debt: cost })
    await audit()
    expect(await balanceOf(c, payer.address)).toBe(50n)
    const inDebt = await askAtlas(m, m.key)
    expect(inDebt.status).toBe(402)
    expect((await inDebt.json()).error.message).toMatch(/owes/)

    // Refilled: the debt is lifted, the charge collected once, and the payer served again.
    await mintUsdc({ client: c.client, minter: c.minter, usdc: c.usdc, to: payer.address, amount: USDC })
    await evmRail(m).watcher.syncNow()
    expect((await account()).debt).toBe(0n)
    const second = await m.server.settler.runOnce()
    expect(second.batches.map((b) => b.failedPayers)).toEqual([[]])
    expect(await m.server.settler.runOnce()).toMatchObject({ batches: [] })
    await evmRail(m).watcher.syncNow()
    expect(await balanceOf(c, payer.address)).toBe(50n + USDC - cost)
    const provider = (await m.store.accounts.byAddress(P.atlasCheap))!.id
    const books = await m.store.accounts.books(provider)
    expect(books.pending).toBe(0n)
    expect((await balanceOf(c, P.atlasCheap as Address)) + (await balanceOf(c, FEE_ADDRESS))).toBe(cost)
    expect(await account()).toMatchObject({ balance: 50n + USDC - cost, held: 0n, debt: 0n })
    expect((await askAtlas(m, m.key)).status).toBe(200)
    await audit()
  })
})
