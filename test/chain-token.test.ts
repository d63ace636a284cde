import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseSignature } from 'viem'
import { usdcAbi } from '../src/chain/contracts.js'
import { walletFor } from '../src/chain/deploy.js'
import { anvilAccount } from '../src/chain/anvil.js'
import { hasAnvil, newPayer, startChain, type Chain } from './helpers/chain.js'

/** The test token: 6 decimals, mint by its deployer only, and EIP-2612 permit so a wallet can approve without gas. */
describe.skipIf(!hasAnvil)('TestUSDC (anvil)', () => {
  let c: Chain
  beforeAll(async () => {
    c = await startChain()
  })
  afterAll(() => c?.close())

  const read = <F extends 'decimals' | 'nonces' | 'allowance'>(functionName: F, args: unknown[] = []) =>
    c.client.readContract({ address: c.usdc, abi: usdcAbi, functionName, args } as never) as Promise<bigint | number>

  it('has 6 decimals and refuses mint from anyone but its deployer', async () => {
    expect(await read('decimals')).toBe(6)
    const stranger = await newPayer(c, 0n, 0n)
    const attempt = c.client.simulateContract({
      account: stranger.address,
      address: c.usdc,
      abi: usdcAbi,
      functionName: 'mint',
      args: [stranger.address, 1n],
    })
    await expect(attempt).rejects.toThrow(/NotMinter/)
  })

  it('sets an allowance to the settler from a signed permit, once', async () => {
    const owner = await newPayer(c, 1_000_000n, 0n)
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 3600)
    const message = { owner: owner.address, spender: c.settler, value: 750_000n, nonce: 0n, deadline }
    const signature = await owner.account.signTypedData({
      domain: { name: 'USD Coin', version: '2', chainId: c.anvil.chainId, verifyingContract: c.usdc },
      types: {
        Permit: [
          { name: 'owner', type: 'address' },
          { name: 'spender', type: 'address' },
          { name: 'value', type: 'uint256' },
          { name: 'nonce', type: 'uint256' },
          { name: 'deadline', type: 'uint256' },
        ],
      },
      primaryType: 'Permit',
      message,
    })
    const { v, r, s } = parseSignature(signature)
    const args = [owner.address, c.settler, 750_000n, deadline, Number(v), r, s] as const
    // Anyone may submit the permit (here the operator pays the gas); the owner needs no ETH for it.
    const relayer = walletFor(c.client, anvilAccount(9))
    const hash = await relayer.writeContract({ address: c.usdc, abi: usdcAbi, functionName: 'permit', args })
    expect((await c.client.waitForTransactionReceipt({ hash })).status).toBe('success')
    expect(await read('allowance', [owner.address, c.settler])).toBe(750_000n)
    expect(await read('nonces', [owner.address])).toBe(1n)
    const replay = c.client.simulateContract({
      account: anvilAccount(9),
      address: c.usdc,
      abi: usdcAbi,
      functionName: 'permit',
      args,
    })
    await expect(replay).rejects.toThrow(/InvalidSignature/)
  })
})
