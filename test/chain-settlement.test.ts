import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { BaseError, ContractFunctionRevertedError, type Address, zeroHash } from 'viem'
import { SYSTEM_ACCOUNTS } from '../src/store/accounts.js'
import { batchKey, settlerAbi } from '../src/chain/contracts.js'
import { walletFor } from '../src/chain/deploy.js'
import { walletOnChain } from '../src/chain/status.js'
import { chat, P, type Market } from './helpers/market.js'
import { signIn } from './helpers/portal.js'
import {
  askAtlas,
  balanceOf,
  evmRail,
  FEE_ADDRESS,
  hasAnvil,
  hello,
  startChainMarket,
  USDC,
  VENDOR_ADDRESS,
  type Chain,
  type ChainMarket,
  type Payer,
} from './helpers/chain.js'

describe.skipIf(!hasAnvil)('settlement on chain (anvil)', () => {
  let c: Chain
  let m: Market
  let payer: Payer
  let env: ChainMarket | undefined

  beforeEach(async () => {
    env = await startChainMarket()
    ;({ c, m, payer } = env)
  })
  afterEach(() => env?.close())

  const ledger = async (address: string) => {
    const a = (await m.store.accounts.byAddress(address))!
    return { account: a, books: await m.store.accounts.books(a.id) }
  }

  it('reads balance and allowance from the chain into the ledger', async () => {
    const a = (await m.store.accounts.byId(m.accountId))!
    expect(a.balance).toBe(5n * USDC)
    expect(a.cap).toBe(4n * USDC)
    expect(await m.store.chain.wallet(m.accountId)).toMatchObject({ balance: 5n * USDC, allowance: 4n * USDC })
    // What the portal's wallet page shows: the wallet as read from the chain and the contract to approve.
    expect(await walletOnChain(m.config.rail as Parameters<typeof walletOnChain>[0], m.store, m.accountId)).toEqual({
      chain_id: 31337,
      usdc: c.usdc,
      approve: c.settler,
      onchain_balance: '5.000000',
      allowance: '4.000000',
      owed: '0.000000',
      read_at_block: expect.any(String),
    })
  })

  it('shows the on-chain wallet and what to approve on the portal wallet page, and refuses ledger deposits', async () => {
    const portal = await signIn(m.url, payer.account as Parameters<typeof signIn>[1])
    const w = await (await portal.call('GET', '/wallet')).json()
    expect(w).toMatchObject({ balance: '5.000000', cap: '4.000000' })
    expect(w.chain).toMatchObject({
      chain_id: 31337,
      usdc: c.usdc,
      approve: c.settler,
      onchain_balance: '5.000000',
      allowance: '4.000000',
      owed: '0.000000',
    })
    const deposit = await portal.call('POST', '/wallet/deposit', { amount: '1' })
    expect(deposit.status).toBe(400)
    expect((await deposit.json()).error.message).toMatch(/on chain/)
  })

  it('pays providers, the fee account and the vendor address so that chain and ledger agree to the unit', async () => {
    for (const model of ['svc/atlas@1', 'svc/tern@2', 'svc/atlas@1']) {
      const res = await chat(m.url, m.key, { model, messages: hello, max_tokens: 400 })
      expect(res.status).toBe(200)
    }
    // Every candidate of cortex failing sends the request to the managed vendor, paid to VENDOR_ADDRESS on chain.
    for (const s of [m.sims.atlasCheap, m.sims.atlasDear, m.sims.tern, m.sims.wren]) s.setFault({ kind: 'status-500' })
    const managed = await chat(m.url, m.key, { model: 'svc/cortex@1', messages: hello, max_tokens: 400 })
    expect(managed.status).toBe(200)
    expect((await managed.json()).svc.routing.vendor_fallback).toBe(true)

    const report = await m.server.settler.runOnce()
    expect(report.batches).toHaveLength(1)
    expect(report.batches[0]!.failedPayers).toEqual([])
    const [batch] = await m.store.settlement.batches(['settled'])
    expect(batch!.txHash).toMatch(/^0x[0-9a-f]{64}$/)
    await evmRail(m).watcher.syncNow()

    const user = await ledger(payer.address)
    expect(user.account.balance).toBeLessThan(5n * USDC)
    expect(await balanceOf(c, payer.address)).toBe(user.account.balance)
    expect(user.account.cap).toBe(4n * USDC - (5n * USDC - user.account.balance))
    for (const address of [P.atlasCheap, P.tern]) {
      const p = await ledger(address)
      expect(p.books.available).toBeGreaterThan(0n)
      expect(p.books.pending).toBe(0n)
      expect(await balanceOf(c, address as Address)).toBe(p.books.available)
    }
    const fees = await ledger(SYSTEM_ACCOUNTS.fees)
    expect(fees.books.available).toBeGreaterThan(0n)
    expect(await balanceOf(c, FEE_ADDRESS)).toBe(fees.books.available)
    const vendor = await ledger(SYSTEM_ACCOUNTS.vendor)
    expect(vendor.books.available).toBeGreaterThan(0n)
    expect(await balanceOf(c, VENDOR_ADDRESS)).toBe(vendor.books.available)
    const audit = await m.store.ledger.audit()
    expect(audit.unbalanced).toEqual([])
    expect(audit.inconsistent).toEqual([])
  })

  it('refuses a replayed batch on chain and changes nothing', async () => {
    expect((await askAtlas(m, m.key)).status).toBe(200)
    await m.server.settler.runOnce()
    const [batch] = await m.store.settlement.batches(['settled'])
    const legs = await m.store.settlement.legs(batch!.id)
    const before = await Promise.all([payer.address, P.atlasCheap as Address, FEE_ADDRESS].map((a) => balanceOf(c, a)))
    const operator = walletFor(c.client, c.operator)
    const chainLegs = [
      {
        payer: payer.address,
        payee: P.atlasCheap as Address,
        amount: legs.find((l) => l.payeeId !== l.payerId)!.amount,
      },
    ]
    const replay = c.client.simulateContract({
      account: c.operator,
      address: c.settler,
      abi: settlerAbi,
      functionName: 'settle',
      args: [batchKey(batch!.id), zeroHash, chainLegs],
    })
    const err = await replay.then(
      () => null,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(BaseError)
    const reverted = (err as BaseError).walk(
      (e) => e instanceof ContractFunctionRevertedError,
    ) as ContractFunctionRevertedError | null
    expect(reverted?.data?.errorName).toBe('BatchAlreadyExecuted')
    // Sent anyway (no simulation), it is mined as a revert.
    const hash = await operator.writeContract({
      address: c.settler,
      abi: settlerAbi,
      functionName: 'settle',
      args: [batchKey(batch!.id), zeroHash, chainLegs],
      gas: 300_000n,
    })
    expect((await c.client.waitForTransactionReceipt({ hash })).status).toBe('reverted')
    expect(
      await Promise.all([payer.address, P.atlasCheap as Address, FEE_ADDRESS].map((a) => balanceOf(c, a))),
    ).toEqual(before)
    // The ledger refuses the replay too.
    expect(await m.store.settlement.markSettled(batch!.id, Date.now())).toBe(false)
    // Nobody but the operator may settle.
    const stranger = c.client.simulateContract({
      account: payer.address,
      address: c.settler,
      abi: settlerAbi,
      functionName: 'settle',
      args: [batchKey('bat_other'), zeroHash, chainLegs],
    })
    await expect(stranger).rejects.toThrow(/NotOperator/)
  })
})
