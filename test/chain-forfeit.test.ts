import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Address } from 'viem'
import { chat, P, type Market } from './helpers/market.js'
import {
  balanceOf,
  evmRail,
  hasAnvil,
  hello,
  startChainMarket,
  type Chain,
  type ChainMarket,
  type Payer,
} from './helpers/chain.js'

/**
 * Held and forfeited earnings on the chain rail: a held charge is never collected from the payer's wallet, and once
 * forfeited the wallet owes it no more, so the watcher's reading of the wallet and the ledger agree to the unit.
 */
describe.skipIf(!hasAnvil)('forfeited earnings on chain (anvil)', () => {
  let env: ChainMarket | undefined
  let c: Chain
  let m: Market
  let payer: Payer
  beforeAll(async () => {
    env = await startChainMarket()
    ;({ c, m, payer } = env)
  })
  afterAll(() => env?.close())

  const served = async () => {
    const res = await chat(m.url, m.key, {
      model: 'svc/atlas@1',
      messages: hello,
      max_tokens: 400,
      provider: { only: [P.atlasCheap] },
    })
    expect(res.status).toBe(200)
    return (await res.json()).svc.request_id as string
  }

  it('settles what was earned before, never collects the held charge, and refunds it to the wallet on forfeit', async () => {
    const paid = await served()
    await sleep(5)
    const fromAt = Date.now()
    await sleep(5)
    const held = await served()
    // What the auditor does when it quarantines the offer.
    await m.store.heldEarnings.hold({
      id: 'held_chain',
      provider: P.atlasCheap,
      model: 'svc/atlas@1',
      fromAt,
      auditId: 'aud_chain',
      now: Date.now(),
    })
    const cost = async (id: string) => (await m.store.usage.get(m.accountId, id))!.cost
    const walletBefore = await balanceOf(c, payer.address)
    const report = await m.server.settler.runOnce()
    expect(report.batches).toHaveLength(1)
    expect(await balanceOf(c, payer.address)).toBe(walletBefore - (await cost(paid)))

    const refunded = await m.store.heldEarnings.forfeit('held_chain', Date.now(), 'test')
    expect(refunded).toEqual({ charges: 1, refunded: await cost(held) })
    await evmRail(m).watcher.syncNow()
    const account = (await m.store.accounts.byId(m.accountId))!
    // Nothing is owed: the ledger is the wallet and its allowance, as read from the chain.
    expect(account.balance).toBe(await balanceOf(c, payer.address))
    const wallet = (await m.store.chain.wallet(m.accountId))!
    expect([account.balance, account.cap]).toEqual([wallet.balance, wallet.allowance])
    expect((await m.server.settler.runOnce()).batches).toEqual([])
    expect(await balanceOf(c, payer.address)).toBe(walletBefore - (await cost(paid)))
    const provider = (await m.store.accounts.byAddress(P.atlasCheap))!
    const books = await m.store.accounts.books(provider.id)
    expect(books.pending).toBe(0n)
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(books.available)
    const audit = await m.store.ledger.audit()
    expect([audit.unbalanced, audit.inconsistent]).toEqual([[], []])
  })
})
