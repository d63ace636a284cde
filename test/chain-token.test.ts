import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseEventLogs, parseSignature, zeroHash, type Address, type Hex } from 'viem'
import { batchKey, settlerAbi, usdcAbi } from '../src/chain/contracts.js'
import { walletFor } from '../src/chain/deploy.js'
import { anvilAccount } from '../src/chain/anvil.js'
import { balanceOf, hasAnvil, newPayer, startChain, type Chain, type Payer } from './helpers/chain.js'

/**
 * The test token: 6 decimals, mint by its deployer only, EIP-2612 permit so a wallet can approve without gas, and
 * EIP-3009 transfers with authorization (x402's `exact` scheme on EVM) so a wallet can pay without gas or approval.
 */
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

  /** A signed EIP-3009 authorization of `from`'s, as x402's `exact` client signs it, and its contract arguments. */
  const authorize = async (
    from: Payer,
    type: 'TransferWithAuthorization' | 'ReceiveWithAuthorization',
    o: { to: Address; value: bigint; validAfter?: bigint; validBefore?: bigint; nonce?: Hex },
  ) => {
    const now = BigInt(Math.floor(Date.now() / 1000))
    const message = {
      from: from.address,
      to: o.to,
      value: o.value,
      validAfter: o.validAfter ?? now - 600n,
      validBefore: o.validBefore ?? now + 600n,
      nonce: o.nonce ?? (`0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex')}` as Hex),
    }
    const signature = await from.account.signTypedData({
      domain: { name: 'USD Coin', version: '2', chainId: c.anvil.chainId, verifyingContract: c.usdc },
      types: {
        [type]: [
          { name: 'from', type: 'address' },
          { name: 'to', type: 'address' },
          { name: 'value', type: 'uint256' },
          { name: 'validAfter', type: 'uint256' },
          { name: 'validBefore', type: 'uint256' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: type,
      message,
    })
    const { v, r, s } = parseSignature(signature)
    const args = [
      message.from,
      message.to,
      message.value,
      message.validAfter,
      message.validBefore,
      message.nonce,
      Number(v),
      r,
      s,
    ] as const
    return { message, args }
  }
  const relayer = () => walletFor(c.client, anvilAccount(9))
  const send = async (
    functionName: 'transferWithAuthorization' | 'receiveWithAuthorization',
    args: readonly unknown[],
    by = relayer(),
  ) => {
    const hash = await by.writeContract({ address: c.usdc, abi: usdcAbi, functionName, args } as never)
    return (await c.client.waitForTransactionReceipt({ hash })).status
  }
  const refused = (
    functionName: 'transferWithAuthorization' | 'receiveWithAuthorization' | 'cancelAuthorization',
    args: readonly unknown[],
    account: Address = anvilAccount(9).address,
  ) => c.client.simulateContract({ account, address: c.usdc, abi: usdcAbi, functionName, args } as never)

  it('moves USDC on a signed transfer authorization sent by anyone, once, within its window', async () => {
    const payer = await newPayer(c, 1_000_000n, 0n)
    const payee = (await newPayer(c, 0n, 0n)).address
    const { message, args } = await authorize(payer, 'TransferWithAuthorization', { to: payee, value: 400_000n })
    expect(await send('transferWithAuthorization', args)).toBe('success')
    expect([await balanceOf(c, payer.address), await balanceOf(c, payee)]).toEqual([600_000n, 400_000n])
    const used = await c.client.readContract({
      address: c.usdc,
      abi: usdcAbi,
      functionName: 'authorizationState',
      args: [payer.address, message.nonce],
    } as never)
    expect(used).toBe(true)
    await expect(refused('transferWithAuthorization', args)).rejects.toThrow(/AuthorizationAlreadyUsed/)
    const now = BigInt(Math.floor(Date.now() / 1000))
    const expired = await authorize(payer, 'TransferWithAuthorization', {
      to: payee,
      value: 1n,
      validBefore: now - 60n,
    })
    await expect(refused('transferWithAuthorization', expired.args)).rejects.toThrow(/AuthorizationExpired/)
    const early = await authorize(payer, 'TransferWithAuthorization', { to: payee, value: 1n, validAfter: now + 600n })
    await expect(refused('transferWithAuthorization', early.args)).rejects.toThrow(/AuthorizationNotYetValid/)
    // A changed amount no longer matches the signature; more than the balance is refused as such.
    const changed = [...args.slice(0, 2), 500_000n, ...args.slice(3, 5), `0x${'11'.repeat(32)}`, ...args.slice(6)]
    await expect(refused('transferWithAuthorization', changed)).rejects.toThrow(/InvalidSignature/)
    const tooMuch = await authorize(payer, 'TransferWithAuthorization', { to: payee, value: 700_000n })
    await expect(refused('transferWithAuthorization', tooMuch.args)).rejects.toThrow(/InsufficientBalance/)
  })

  it('lets only the payee send a receive authorization, and refuses one its signer canceled', async () => {
    const payer = await newPayer(c, 1_000_000n, 0n)
    const payee = await newPayer(c, 0n, 0n)
    const { args } = await authorize(payer, 'ReceiveWithAuthorization', { to: payee.address, value: 250_000n })
    await expect(refused('receiveWithAuthorization', args)).rejects.toThrow(/CallerNotPayee/)
    expect(await send('receiveWithAuthorization', args, walletFor(c.client, payee.account))).toBe('success')
    expect(await balanceOf(c, payee.address)).toBe(250_000n)

    const later = await authorize(payer, 'TransferWithAuthorization', { to: payee.address, value: 1n })
    const signature = await payer.account.signTypedData({
      domain: { name: 'USD Coin', version: '2', chainId: c.anvil.chainId, verifyingContract: c.usdc },
      types: {
        CancelAuthorization: [
          { name: 'authorizer', type: 'address' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: 'CancelAuthorization',
      message: { authorizer: payer.address, nonce: later.message.nonce },
    })
    const { v, r, s } = parseSignature(signature)
    const hash = await relayer().writeContract({
      address: c.usdc,
      abi: usdcAbi,
      functionName: 'cancelAuthorization',
      args: [payer.address, later.message.nonce, Number(v), r, s],
    } as never)
    expect((await c.client.waitForTransactionReceipt({ hash })).status).toBe('success')
    await expect(refused('transferWithAuthorization', later.args)).rejects.toThrow(/AuthorizationAlreadyUsed/)
  })

  it('lets the settler pay legs from its own balance, what was paid to it in advance, all or none', async () => {
    // A payment authorized to the settler (as an x402 payment is) leaves its USDC with the settler.
    const buyer = await newPayer(c, 1_000_000n, 0n)
    const { args } = await authorize(buyer, 'TransferWithAuthorization', { to: c.settler, value: 300_000n })
    expect(await send('transferWithAuthorization', args)).toBe('success')
    expect(await balanceOf(c, c.settler)).toBe(300_000n)
    const approver = await newPayer(c, 1_000_000n, 1_000_000n)
    const [p1, p2] = [(await newPayer(c, 0n, 0n)).address, (await newPayer(c, 0n, 0n)).address]
    const settle = async (id: string, legs: { payer: Address; payee: Address; amount: bigint }[]) => {
      const hash = await relayer().writeContract({
        address: c.settler,
        abi: settlerAbi,
        functionName: 'settle',
        args: [batchKey(id), zeroHash, legs],
      })
      const receipt = await c.client.waitForTransactionReceipt({ hash })
      return parseEventLogs({ abi: settlerAbi, logs: receipt.logs, eventName: 'PayerFailed' }).map((e) => e.args.payer)
    }
    const failed = await settle('bat_prepaid_1', [
      { payer: c.settler, payee: p1, amount: 200_000n },
      { payer: c.settler, payee: p2, amount: 50_000n },
      { payer: approver.address, payee: p1, amount: 10_000n },
    ])
    expect(failed).toEqual([])
    expect([await balanceOf(c, p1), await balanceOf(c, p2), await balanceOf(c, c.settler)]).toEqual([
      210_000n,
      50_000n,
      50_000n,
    ])
    // More than it holds: its legs fail together, the other payer's are paid.
    const short = await settle('bat_prepaid_2', [
      { payer: c.settler, payee: p1, amount: 40_000n },
      { payer: c.settler, payee: p2, amount: 40_000n },
      { payer: approver.address, payee: p2, amount: 5_000n },
    ])
    expect(short).toEqual([c.settler])
    expect([await balanceOf(c, p1), await balanceOf(c, p2), await balanceOf(c, c.settler)]).toEqual([
      210_000n,
      55_000n,
      50_000n,
    ])
  })
})
