import { zeroHash } from 'viem'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Address } from 'viem'
import { batchKey, settlerAbi, type ChainLeg } from '../src/chain/contracts.js'
import { mintUsdc, walletFor } from '../src/chain/deploy.js'
import { anvilAccount } from '../src/chain/anvil.js'
import { hasAnvil, newPayer, startChain, type Chain, type Payer } from './helpers/chain.js'

/** Gas of BatchSettler.settle by batch shape, reported per transfer leg (payees already hold USDC, as providers do). */
describe.skipIf(!hasAnvil)('settler gas per transfer leg', () => {
  let c: Chain
  let payers: Payer[]
  const payees: Address[] = Array.from({ length: 10 }, (_, i) => anvilAccount(10 + i).address)
  let n = 0

  beforeAll(async () => {
    c = await startChain()
    payers = []
    // One after the other: the minter's transactions take consecutive nonces.
    for (let i = 0; i < 10; i++) payers.push(await newPayer(c, 1_000_000_000n, 1_000_000_000n))
    for (const p of payees) await mintUsdc({ client: c.client, minter: c.minter, usdc: c.usdc, to: p, amount: 1n })
  })
  afterAll(() => c?.close())

  async function gasOf(legs: ChainLeg[]): Promise<bigint> {
    const hash = await walletFor(c.client, c.operator).writeContract({
      address: c.settler,
      abi: settlerAbi,
      functionName: 'settle',
      args: [batchKey(`bat_gas_${n++}`), zeroHash, legs],
    })
    const r = await c.client.waitForTransactionReceipt({ hash })
    expect(r.status).toBe('success')
    return r.gasUsed
  }

  it('stays flat per leg as batches grow', async () => {
    const onePayer = (k: number) =>
      payees.slice(0, k).map((payee) => ({ payer: payers[0]!.address, payee, amount: 1_000n }))
    const manyPayers = (k: number) =>
      payers.slice(0, k).flatMap((p) => [
        { payer: p.address, payee: payees[0]!, amount: 950n },
        { payer: p.address, payee: payees[1]!, amount: 50n },
      ])
    const single = await gasOf(onePayer(1))
    const tenPayees = await gasOf(onePayer(10))
    const twoLegsOne = await gasOf(manyPayers(1))
    const twoLegsTen = await gasOf(manyPayers(10))
    const perLegSamePayer = (tenPayees - single) / 9n
    const perPayerOfTwoLegs = (twoLegsTen - twoLegsOne) / 9n
    console.info(
      [
        'BatchSettler.settle gas (cancun, optimizer 200 runs; payees already hold USDC):',
        `  1 leg: ${single}`,
        `  1 payer x 10 payees: ${tenPayees}  -> ${perLegSamePayer} per additional leg of the same payer`,
        `  10 payers x 2 legs (provider + fee): ${twoLegsTen}  -> ${perPayerOfTwoLegs} per additional payer, ${perPayerOfTwoLegs / 2n} per leg`,
      ].join('\n'),
    )
    expect(perLegSamePayer).toBeLessThan(40_000n)
    expect(perPayerOfTwoLegs / 2n).toBeLessThan(40_000n)
  })
})
