import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Address, Hex } from 'viem'
import type { Config } from '../src/config-schema.js'
import { Settler } from '../src/settlement/settler.js'
import { createEvmRail, type EvmRail } from '../src/settlement/evm-rail.js'
import { P, type Market } from './helpers/market.js'
import {
  askAtlas,
  balanceOf,
  hasAnvil,
  startChainMarket,
  until,
  type Chain,
  type ChainMarket,
} from './helpers/chain.js'
import { PruningRpc, type History } from './helpers/pruning-rpc.js'

/**
 * A batch's outcome (which payers the contract collected) is in its transaction's logs, which a pruned node forgets
 * (a reth full node keeps receipts ~10 000 blocks): a batch is settled from what was seen when it was mined, or from
 * whatever history the node still has, and one whose outcome no history tells never holds back the batches after it.
 */
describe.skipIf(!hasAnvil)('batches whose history the node pruned (anvil)', () => {
  let c: Chain
  let m: Market
  let env: ChainMarket | undefined
  let rpc: PruningRpc | undefined
  const rails: EvmRail[] = []

  beforeEach(async () => {
    env = await startChainMarket()
    ;({ c, m } = env)
    rpc = await PruningRpc.start(c.anvil.rpcUrl)
    expect((await askAtlas(m, m.key)).status).toBe(200)
  })
  afterEach(async () => {
    for (const r of rails.splice(0)) await r.close()
    await rpc?.close()
    await env?.close()
  })

  /** A rail (what a process builds) reading the chain through the pruning node. */
  const railThroughPruning = async (extra: Partial<Extract<Config['rail'], { kind: 'evm' }>> = {}) => {
    const rail = await createEvmRail(
      { ...(m.config.rail as Extract<Config['rail'], { kind: 'evm' }>), rpcUrl: rpc!.url, ...extra },
      m.store,
      { log: () => {} },
    )
    rails.push(rail)
    return rail
  }
  const provider = async () => (await m.store.accounts.byAddress(P.atlasCheap))!.id
  const head = () => c.client.getBlockNumber({ cacheTime: 0 })

  it('confirms a batch seen mined from what it saw then, when the node has since forgotten its logs and receipt', async () => {
    const rail = await railThroughPruning({ confirmations: 3 })
    const mined = rpc!.answered('eth_getTransactionReceipt')
    const pass = new Settler(m.store, rail).runOnce()
    pass.catch(() => {}) // awaited below
    // The rail has the receipt in hand; then the node forgets the block's history while the batch gathers
    // confirmations.
    await mined
    rpc!.pruneThrough(await head())
    await c.test.mine({ blocks: 3 })
    const report = await pass
    expect(report.batches).toHaveLength(1)
    expect(report.unfinished).toEqual([])
    const books = await m.store.accounts.books(await provider())
    expect(books.pending).toBe(0n)
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(books.available)
  })

  /** Nodes that forgot some of a block's history, and the part that still tells a batch's outcome. */
  const tellers: [string, History[]][] = [
    ['an archive node (its logs)', []],
    ["a node that forgot the logs (its transaction's receipt)", ['logs']],
    ["a node that forgot the logs and the transaction index (its block's receipts)", ['logs', 'index']],
  ]

  it.each(tellers)(
    'goes on with later batches past one whose outcome the node cannot tell, and settles it, once, on %s',
    async (_, forgotten) => {
      const before = await balanceOf(c, P.atlasCheap as Address)
      // The process sends a batch and dies before seeing it mined.
      await c.test.setAutomine(false)
      const first = await railThroughPruning()
      const dying = new Settler(m.store, first).runOnce()
      dying.catch(() => {})
      const [sent] = await until(
        () => m.store.settlement.batches(['sent']),
        (b) => b.length === 1,
      )
      await until(
        () => c.client.getTransaction({ hash: sent!.txHash as Hex }).catch(() => undefined),
        (t) => t !== undefined,
      )
      await first.close()
      await expect(dying).rejects.toThrow()
      await c.test.mine({ blocks: 1 })
      await c.test.setAutomine(true)
      // Long after, the node no longer has that block's logs or receipts; meanwhile a new charge is due.
      rpc!.pruneThrough(await head())
      expect((await askAtlas(m, m.key)).status).toBe(200)

      const restarted = await railThroughPruning()
      const report = await new Settler(m.store, restarted).runOnce()
      expect(report.unfinished.map((u) => u.id)).toEqual([sent!.id])
      expect(report.unfinished[0]!.why).toMatch(/history/)
      expect(report.batches).toHaveLength(1)
      expect(report.batches[0]!.failedPayers).toEqual([])
      expect((await m.store.settlement.batches(['sent'])).map((b) => b.id)).toEqual([sent!.id])
      // What the unresolved batch owes the provider stays pending; what the later one paid is on chain.
      const paidLater = (await balanceOf(c, P.atlasCheap as Address)) - before
      expect(paidLater).toBeGreaterThan(0n)
      expect((await m.store.accounts.books(await provider())).pending).toBeGreaterThan(0n)

      // The operator points the rail at a node that kept enough: the batch settles, paid once.
      rpc!.pruneThrough(await head(), forgotten)
      const again = await new Settler(m.store, restarted).runOnce()
      expect(again.unfinished).toEqual([])
      expect(again.batches.map((b) => b.id)).toEqual([sent!.id])
      const books = await m.store.accounts.books(await provider())
      expect(books.pending).toBe(0n)
      expect(await balanceOf(c, P.atlasCheap as Address)).toBe(books.available)
      expect(await m.store.settlement.countBatches(['open', 'sent'])).toBe(0)
      const audit = await m.store.ledger.audit()
      expect(audit.unbalanced).toEqual([])
      expect(audit.inconsistent).toEqual([])
    },
  )
})
