import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { zeroAddress, type Address } from 'viem'
import { SYSTEM_ACCOUNTS } from '../src/store/accounts.js'
import { chat, P, type Market } from './helpers/market.js'
import {
  askAtlas,
  balanceOf,
  evmRail,
  hasAnvil,
  hello,
  startChainMarket,
  USDC,
  type Chain,
  type ChainMarket,
  type Payer,
} from './helpers/chain.js'

/**
 * A transfer the token refuses for a reason that is not the payer's (here: a payee at the zero address, which the token
 * refuses as Circle's USDC refuses a blocklisted one) never makes the payer a debtor: its charges wait, the payer's
 * other charges settle, and nothing is sent again and again.
 */
describe.skipIf(!hasAnvil)('a payee the token refuses (anvil)', () => {
  let c: Chain
  let m: Market
  let payer: Payer
  let env: ChainMarket | undefined

  beforeEach(async () => {
    // The cheap atlas provider, who serves atlas requests, is paid at an address the token refuses.
    env = await startChainMarket({}, (cfg) => (cfg.providers[0]!.address = zeroAddress))
    ;({ c, m, payer } = env)
  })
  afterEach(() => env?.close())

  const account = async () => (await m.store.accounts.byId(m.accountId))!
  const accountOf = async (address: string) => (await m.store.accounts.byAddress(address))!

  it('keeps the payer out of debt, settles its other charges and holds back only those to the refused payee', async () => {
    expect((await askAtlas(m, m.key)).status).toBe(200)
    expect((await chat(m.url, m.key, { model: 'svc/tern@2', messages: hello, max_tokens: 400 })).status).toBe(200)
    const refused = (await accountOf(zeroAddress)).id
    const tern = (await accountOf(P.tern)).id
    const fees = (await accountOf(SYSTEM_ACCOUNTS.fees)).id
    const owedToRefused = (await m.store.accounts.books(refused)).pending
    expect(owedToRefused).toBeGreaterThan(0n)

    // A batch made before the payee was known to be refused (it became so after): the payer's transfers fail on chain.
    const early = (await m.store.settlement.createBatch({
      id: 'bat_before_refusal',
      feeAccountId: fees,
      now: Date.now(),
    }))!
    expect((await m.store.settlement.legs(early.id)).map((l) => l.payeeId).sort()).toEqual([fees, refused, tern].sort())
    const first = await m.server.settler.runOnce()
    expect(first.batches.map((b) => b.id)).toEqual([early.id])
    expect(first.batches[0]!.failedPayers).toEqual([])
    await evmRail(m).watcher.syncNow()
    expect((await account()).debt).toBe(0n)
    expect(await balanceOf(c, payer.address)).toBe(5n * USDC)
    // Still admitted: the failure was not the payer's.
    expect((await askAtlas(m, m.key)).status).toBe(200)

    // The next pass leaves the refused payee's charges out and settles the rest.
    const second = await m.server.settler.runOnce()
    expect(second.batches).toHaveLength(1)
    expect(second.batches[0]!.failedPayers).toEqual([])
    expect((await m.store.settlement.legs(second.batches[0]!.id)).map((l) => l.payeeId).sort()).toEqual(
      [fees, tern].sort(),
    )
    expect(second.waiting.payees).toEqual([refused])
    await evmRail(m).watcher.syncNow()
    const ternBooks = await m.store.accounts.books(tern)
    expect(ternBooks.pending).toBe(0n)
    expect(await balanceOf(c, P.tern as Address)).toBe(ternBooks.available)
    // What the refused payee (and the fee on it) is owed stays pending, and owed by the payer: its wallet still holds
    // it.
    const owed = await m.store.chain.owed(m.accountId)
    const refusedPending = (await m.store.accounts.books(refused)).pending
    expect(refusedPending).toBeGreaterThan(owedToRefused)
    expect(owed).toBe(refusedPending + (await m.store.accounts.books(fees)).pending)
    expect(await balanceOf(c, payer.address)).toBe((await account()).balance + owed)

    // Nothing is sent again while the payee stays refused, and the payer is never a debtor.
    expect((await m.server.settler.runOnce()).batches).toEqual([])
    expect((await account()).debt).toBe(0n)
    expect((await askAtlas(m, m.key)).status).toBe(200)
    const audit = await m.store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
    expect(audit.inconsistent).toEqual([])
  })

  it('leaves a batch whose failure the node cannot explain for a later pass, and settles the batches after it', async () => {
    expect((await askAtlas(m, m.key)).status).toBe(200)
    const fees = (await accountOf(SYSTEM_ACCOUNTS.fees)).id
    const early = (await m.store.settlement.createBatch({
      id: 'bat_unexplained',
      feeAccountId: fees,
      now: Date.now(),
    }))!
    expect((await chat(m.url, m.key, { model: 'svc/tern@2', messages: hello, max_tokens: 400 })).status).toBe(200)
    // The token's questions fail (a node that rate-limits eth_call, say).
    const rail = evmRail(m) as unknown as { probe: Record<string, (...args: unknown[]) => Promise<boolean>> }
    const probe = rail.probe
    const asked = { refusesPayee: probe.refusesPayee!, refusesLeg: probe.refusesLeg!, covers: probe.covers! }
    for (const name of Object.keys(asked))
      probe[name] = async () => {
        throw new Error('rate limited')
      }
    const first = await m.server.settler.runOnce()
    expect(first.unfinished.map((u) => u.id)).toEqual([early.id])
    expect(first.unfinished[0]!.why).toContain('rate limited')
    // The tern charge made after it went in a batch of its own, which settled.
    expect(first.batches).toHaveLength(1)
    expect(first.batches[0]).toMatchObject({ failedPayers: [], deferredPayers: [] })
    expect((await account()).debt).toBe(0n)
    // Once the node answers, the batch is read from what was stored when it was mined (not sent again) and its payer's
    // charges wait for the refused payee, without debt.
    for (const [name, fn] of Object.entries(asked)) probe[name] = fn.bind(probe)
    const second = await m.server.settler.runOnce()
    expect(second.unfinished).toEqual([])
    expect(second.batches.find((b) => b.id === early.id)).toMatchObject({
      failedPayers: [],
      deferredPayers: [m.accountId],
    })
    expect((await account()).debt).toBe(0n)
    expect(await m.store.settlement.batches(['open', 'sent'])).toEqual([])
    const audit = await m.store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
    expect(audit.inconsistent).toEqual([])
  })
})
