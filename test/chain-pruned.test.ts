import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Address } from 'viem'
import type { Config } from '../src/config.js'
import { Settler } from '../src/settlement/settler.js'
import { createEvmRail, type EvmRail } from '../src/settlement/evm-rail.js'
import { P, type Market } from './helpers/market.js'
import { askAtlas, balanceOf, hasAnvil, startChainMarket, type Chain, type ChainMarket } from './helpers/chain.js'
import { PruningRpc } from './helpers/pruning-rpc.js'

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
    const rail = await createEvmRail({ ...(m.config.rail as Extract<Config['rail'], { kind: 'evm' }>), rpcUrl: rpc!.url, ...extra }, m.store, { log: () => {} })
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
    // The rail has the receipt in hand; then the node forgets the block's history while the batch gathers confirmations.
    await mined
    rpc!.pruneThrough(await head())
    await c.test.mine({ blocks: 3 })
    const report = await pass
    expect(report.batches).toHaveLength(1)
    const books = await m.store.accounts.books(await provider())
    expect(books.pending).toBe(0n)
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(books.available)
  })
})
