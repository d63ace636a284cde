import { createTestClient, http, type Address, type PublicClient } from 'viem'
import { generatePrivateKey, privateKeyToAccount, type LocalAccount } from 'viem/accounts'
import type { Config } from '../../src/config-schema.js'
import { anvilAccount, anvilBinary, anvilKey, startAnvil, type Anvil } from '../../src/chain/anvil.js'
import { publicClientFor } from '../../src/chain/client.js'
import {
  approveSettler,
  deploySettler,
  deployTestUsdc,
  mintUsdc,
  usdcBalance,
  walletFor,
  type Wallet,
} from '../../src/chain/deploy.js'
import { usdcAbi } from '../../src/chain/contracts.js'
import { EvmRail } from '../../src/settlement/evm-rail.js'
import { chat, startMarket, type Market } from './market.js'

/** Chain tests skip themselves when the anvil binary of @foundry-rs/anvil is not installed. */
export const hasAnvil = anvilBinary() !== null

export const OPERATOR_KEY_ENV = 'SVC_TEST_OPERATOR_KEY'
/** Where fees and managed-vendor charges are paid in the test chain. */
export const FEE_ADDRESS = anvilAccount(5).address
export const VENDOR_ADDRESS = anvilAccount(6).address

export interface Chain {
  anvil: Anvil
  client: PublicClient
  test: ReturnType<typeof testClientFor>
  operator: LocalAccount
  minter: Wallet
  usdc: Address
  settler: Address
  close(): Promise<void>
}

function testClientFor(rpcUrl: string) {
  return createTestClient({ mode: 'anvil', transport: http(rpcUrl) })
}

/** A fresh anvil on a free port with the test token and a settler whose operator is anvil's account 9. */
export async function startChain(): Promise<Chain> {
  const anvil = await startAnvil()
  const client = publicClientFor(anvil.rpcUrl, anvil.chainId, 50)
  const operator = anvilAccount(9)
  process.env[OPERATOR_KEY_ENV] = anvilKey(9)
  const minter = walletFor(client, operator)
  const usdc = await deployTestUsdc(client, minter)
  const settler = await deploySettler(client, minter, usdc, operator.address)
  return {
    anvil,
    client,
    test: testClientFor(anvil.rpcUrl),
    operator,
    minter,
    usdc,
    settler,
    close: () => anvil.close(),
  }
}

export function railConfig(c: Chain, extra: Partial<Extract<Config['rail'], { kind: 'evm' }>> = {}): Config['rail'] {
  return {
    kind: 'evm',
    rpcUrl: c.anvil.rpcUrl,
    chainId: c.anvil.chainId,
    usdc: c.usdc,
    settler: c.settler,
    operatorKeyEnv: OPERATOR_KEY_ENV,
    confirmations: 0,
    feeAccount: FEE_ADDRESS,
    vendorAccount: VENDOR_ADDRESS,
    pollMs: 50,
    bumpAfterMs: 60_000,
    ...extra,
  }
}

export interface Payer {
  account: LocalAccount
  address: Address
  wallet: Wallet
}

/** A new wallet with gas, `funds` test USDC and `allowance` approved to the settler. */
export async function newPayer(c: Chain, funds: bigint, allowance: bigint): Promise<Payer> {
  const account = privateKeyToAccount(generatePrivateKey())
  await c.test.setBalance({ address: account.address, value: 10n ** 18n })
  const wallet = walletFor(c.client, account)
  if (funds > 0n)
    await mintUsdc({ client: c.client, minter: c.minter, usdc: c.usdc, to: account.address, amount: funds })
  if (allowance > 0n)
    await approveSettler({ client: c.client, payer: wallet, usdc: c.usdc, settler: c.settler, amount: allowance })
  return { account, address: account.address, wallet }
}

export const balanceOf = (c: Chain, a: Address) => usdcBalance(c.client, c.usdc, a)

/** Moves test USDC out of a payer's wallet (as a user may at any time) and waits until it is mined. */
export async function sendUsdc(c: Chain, from: Payer, to: Address, amount: bigint): Promise<void> {
  const hash = await from.wallet.writeContract({
    address: c.usdc,
    abi: usdcAbi,
    functionName: 'transfer',
    args: [to, amount],
  })
  const receipt = await c.client.waitForTransactionReceipt({ hash, pollingInterval: 50 })
  if (receipt.status !== 'success') throw new Error(`transfer reverted (${hash})`)
}

/** The market's evm rail (startServer builds it from the config). */
export function evmRail(m: Market): EvmRail {
  const rail = m.server.rail
  if (!(rail instanceof EvmRail)) throw new Error('the market does not run the evm rail')
  return rail
}

/** Waits until the watcher's view of an account satisfies `ok` (it syncs as blocks arrive, never per request). */
export async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await read()
    if (ok(v)) return v
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms; last value ${String(v)}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

export const USDC = 1_000_000n
export const hello = [{ role: 'user', content: 'Say something.' }]

export interface ChainMarket {
  c: Chain
  m: Market
  /** The market's test account: a wallet with 5 USDC, 4 of them approved to the settler. */
  payer: Payer
  close(): Promise<void>
}

/**
 * A fresh chain and a market settling on it, its test account read from the wallet; settlement runs on demand.
 * `tuning` adds to the market's; `edit` changes its config after the rail is set.
 */
export async function startChainMarket(
  tuning: Config['tuning'] = {},
  edit?: (config: Config) => void,
): Promise<ChainMarket> {
  const c = await startChain()
  const payer = await newPayer(c, 5n * USDC, 4n * USDC)
  // 200-token replies make charges large enough for a non-zero fee leg.
  const m = await startMarket({
    user: payer.address,
    sim: { replyTokens: 200 },
    tuning: { settleIntervalMs: 0, ...tuning },
    edit: (cfg) => {
      cfg.rail = railConfig(c)
      edit?.(cfg)
    },
  })
  await evmRail(m).watcher.syncNow()
  return {
    c,
    m,
    payer,
    async close() {
      await m.close()
      await c.close()
    },
  }
}

/** A request on atlas large enough to be charged a fee. */
export const askAtlas = (m: Market, key: string) =>
  chat(m.url, key, { model: 'svc/atlas@1', messages: hello, max_tokens: 400 })
