import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Address, Hex } from 'viem'
import type { Config } from '../src/config-schema.js'
import { SYSTEM_ACCOUNTS } from '../src/store/accounts.js'
import { Settler } from '../src/settlement/settler.js'
import { createEvmRail } from '../src/settlement/evm-rail.js'
import { P, type Market } from './helpers/market.js'
import {
  askAtlas,
  balanceOf,
  evmRail,
  hasAnvil,
  startChainMarket,
  until,
  type Chain,
  type ChainMarket,
} from './helpers/chain.js'

/** Restarts and stuck transactions: a batch is paid exactly once whatever happens between send and confirmation. */
describe.skipIf(!hasAnvil)('batch transactions survive restarts and stuck fees (anvil)', () => {
  let c: Chain
  let m: Market
  let env: ChainMarket | undefined

  beforeEach(async () => {
    env = await startChainMarket()
    ;({ c, m } = env)
    expect((await askAtlas(m, m.key)).status).toBe(200)
  })
  afterEach(() => env?.close())

  /** The market's rail config: a second rail over the same store is what a restarted process builds. */
  const evmConfig = () => m.config.rail as Extract<Config['rail'], { kind: 'evm' }>

  /** What the provider and the fee account are owed in the ledger (pending) before settlement. */
  const owedTo = async (address: string) =>
    (await m.store.accounts.books((await m.store.accounts.byAddress(address))!.id)).pending
  const nonceOf = (a: Address) => c.client.getTransactionCount({ address: a, blockTag: 'latest' })

  it('pays once when the process restarts between sending a batch and its confirmation', async () => {
    const due = await owedTo(P.atlasCheap)
    const before = await balanceOf(c, P.atlasCheap as Address)
    const nonce = await nonceOf(c.operator.address)
    await c.test.setAutomine(false)
    const first = m.server.settler.runOnce()
    first.catch(() => {}) // it fails when the process "dies" below
    const [sent] = await until(
      () => m.store.settlement.batches(['sent']),
      (b) => b.length === 1,
    )
    // The transaction is in the node's pool, not mined; the process dies.
    await evmRail(m).close()
    await expect(first).rejects.toThrow()

    const rail = await createEvmRail(evmConfig(), m.store, { log: () => {} })
    const resumed = new Settler(m.store, rail).runOnce()
    await c.test.mine({ blocks: 1 })
    const report = await resumed
    await rail.close()
    expect(report.batches.map((b) => b.id)).toEqual([sent!.id])
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(before + due)
    expect(await nonceOf(c.operator.address)).toBe(nonce + 1)
    const [settled] = await m.store.settlement.batches(['settled'])
    expect(settled!.txHash).toBe(sent!.txHash)
    expect(await owedTo(P.atlasCheap)).toBe(0n)
  })

  it('sends again, once, a batch stored as sent whose transaction never reached the node', async () => {
    const due = await owedTo(P.atlasCheap)
    const before = await balanceOf(c, P.atlasCheap as Address)
    const fees = (await m.store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!.id
    const batch = (await m.store.settlement.createBatch({
      id: 'bat_crashed_before_broadcast',
      feeAccountId: fees,
      now: Date.now(),
    }))!
    const lost: Hex = `0x${'ab'.repeat(32)}`
    await m.store.settlement.markSent(batch.id, lost, await nonceOf(c.operator.address), Date.now())
    const report = await m.server.settler.runOnce()
    expect(report.batches.map((b) => b.id)).toEqual([batch.id])
    const [settled] = await m.store.settlement.batches(['settled'])
    expect(settled!.txHash).not.toBe(lost)
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(before + due)
    // A second pass finds nothing to do and pays nothing.
    expect((await m.server.settler.runOnce()).batches).toEqual([])
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(before + due)
  })

  it('re-sends a stuck batch transaction with higher fees and the same nonce', async () => {
    const rail = await createEvmRail({ ...evmConfig(), bumpAfterMs: 400 }, m.store, { log: () => {} })
    const due = await owedTo(P.atlasCheap)
    const before = await balanceOf(c, P.atlasCheap as Address)
    await c.test.setAutomine(false)
    const pass = new Settler(m.store, rail).runOnce().finally(() => rail.close())
    pass.catch(() => {}) // awaited below; a failed assertion must not leave it unhandled
    const [first] = await until(
      () => m.store.settlement.batches(['sent']),
      (b) => b.length === 1,
    )
    // The hash is stored before the broadcast (a crash between them is the test above): wait for the node to have it.
    const known = (hash: Hex) => c.client.getTransaction({ hash }).catch(() => undefined)
    const a = (await until(
      () => known(first!.txHash as Hex),
      (t) => t !== undefined,
    ))!
    const [bumped] = await until(
      () => m.store.settlement.batches(['sent']),
      (b) => b.length === 1 && b[0]!.txHash !== first!.txHash,
    )
    expect(bumped!.nonce).toBe(first!.nonce)
    // The node replaced the first transaction in its pool with the bumped one.
    const b = (await until(
      () => known(bumped!.txHash as Hex),
      (t) => t !== undefined,
    ))!
    expect(b.nonce).toBe(a.nonce)
    expect(b.maxFeePerGas! * 100n).toBeGreaterThanOrEqual(a.maxFeePerGas! * 110n)
    expect(b.maxPriorityFeePerGas! * 100n).toBeGreaterThanOrEqual(a.maxPriorityFeePerGas! * 110n)
    await c.test.mine({ blocks: 1 })
    const report = await pass
    expect(report.batches).toHaveLength(1)
    const [settled] = await m.store.settlement.batches(['settled'])
    const receipt = await c.client.getTransactionReceipt({ hash: settled!.txHash as Hex })
    expect(receipt.status).toBe('success')
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(before + due)
  })

  it('does not raise the fee of broadcasts the node refused, and lands at fresh fees once it takes one', async () => {
    let refused = 0
    const rail = await createEvmRail({ ...evmConfig(), bumpAfterMs: 150 }, m.store, {
      log: (msg) => void (msg.includes('refused') && refused++),
    })
    const due = await owedTo(P.atlasCheap)
    const before = await balanceOf(c, P.atlasCheap as Address)
    const fresh = await c.client.estimateFeesPerGas()
    const gas = await c.client.getBalance({ address: c.operator.address })
    // The operator has no money for gas: the node refuses every broadcast.
    await c.test.setBalance({ address: c.operator.address, value: 0n })
    const pass = new Settler(m.store, rail).runOnce().finally(() => rail.close())
    pass.catch(() => {})
    await until(
      async () => refused,
      (n) => n >= 8,
      10_000,
    )
    await c.test.setBalance({ address: c.operator.address, value: gas })
    const report = await pass
    expect(report.batches).toHaveLength(1)
    const [settled] = await m.store.settlement.batches(['settled'])
    const tx = await c.client.getTransaction({ hash: settled!.txHash as Hex })
    // Eight refusals bumped by a quarter each would have been six times the fee.
    expect(tx.maxFeePerGas! * 100n).toBeLessThanOrEqual(fresh.maxFeePerGas * 150n)
    expect(tx.maxPriorityFeePerGas! * 100n).toBeLessThanOrEqual(fresh.maxPriorityFeePerGas * 150n)
    expect(await balanceOf(c, P.atlasCheap as Address)).toBe(before + due)
  })
})
