import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Config } from '../../config-schema.js'
import { anvilAccount, anvilKey, startAnvil, type Anvil } from '../../chain/anvil.js'
import { publicClientFor } from '../../chain/client.js'
import { approveSettler, deploySettler, deployTestUsdc, mintUsdc, walletFor } from '../../chain/deploy.js'
import { DEMO_WALLET } from './market.js'

/** The demo's operator key lives in its own variable so a real SVC_OPERATOR_KEY is never confused with it. */
export const DEMO_OPERATOR_KEY_ENV = 'SVC_DEMO_OPERATOR_KEY'
/** The key that relays x402 transfers, apart from the operator's so their nonces never race the batches'. */
export const DEMO_RELAYER_KEY_ENV = 'SVC_DEMO_RELAYER_KEY'
/**
 * Anvil accounts of the demo: 0 is the demo wallet, 1–4 the providers, 5 the fee account, 7 a wallet that pays with
 * x402 (no account, no key), 8 the x402 relayer, 9 the operator.
 */
const OPERATOR_INDEX = 9
const RELAYER_INDEX = 8
export const X402_PAYER_INDEX = 7
const FEE_INDEX = 5

/** The x402 wallet of the demo: its address and key (a well-known test key, holding only test USDC). */
export const x402PayerAddress = () => anvilAccount(X402_PAYER_INDEX).address
export const x402PayerKey = () => anvilKey(X402_PAYER_INDEX)

/** The demo operator's key: anvil's well-known account 9. */
export const demoOperatorKey = () => anvilKey(OPERATOR_INDEX)

export interface AnvilDemo {
  anvil: Anvil
  rail: Extract<Config['rail'], { kind: 'evm' }>
  /** A fresh database per run: the chain starts empty each time, so its ledger must too. */
  storeUrl: string
}

/**
 * Starts anvil on a free port, deploys the test token and a settler, mints `funds` to the demo wallet and approves
 * `cap` to the settler from it, then lets anvil mine a block per second like a live chain.
 */
export async function startAnvilDemo(dataDir: string, funds: bigint, cap: bigint): Promise<AnvilDemo> {
  const anvil = await startAnvil()
  try {
    process.env[DEMO_OPERATOR_KEY_ENV] = demoOperatorKey()
    process.env[DEMO_RELAYER_KEY_ENV] = anvilKey(RELAYER_INDEX)
    const client = publicClientFor(anvil.rpcUrl, anvil.chainId, 100)
    const operator = walletFor(client, anvilAccount(OPERATOR_INDEX))
    const usdc = await deployTestUsdc(client, operator)
    const settler = await deploySettler(client, operator, usdc, operator.account.address)
    await mintUsdc({ client, minter: operator, usdc, to: DEMO_WALLET, amount: funds })
    await approveSettler({ client, payer: walletFor(client, anvilAccount(0)), usdc, settler, amount: cap })
    // The x402 wallet holds test USDC and approves nothing: it pays each request with a signed authorization.
    await mintUsdc({ client, minter: operator, usdc, to: anvilAccount(X402_PAYER_INDEX).address, amount: funds })
    // Set up in a few milliseconds with a block per transaction, then run like a chain with 1 s blocks.
    await client.request({ method: 'evm_setIntervalMining' as never, params: [1] as never })
    const dir = join(dataDir, 'anvil')
    rmSync(dir, { recursive: true, force: true })
    return {
      anvil,
      storeUrl: `sqlite:${join(dir, 'svc.db')}`,
      rail: {
        kind: 'evm',
        rpcUrl: anvil.rpcUrl,
        chainId: anvil.chainId,
        usdc,
        settler,
        operatorKeyEnv: DEMO_OPERATOR_KEY_ENV,
        confirmations: 1,
        feeAccount: anvilAccount(FEE_INDEX).address,
        pollMs: 500,
        x402: { relayerKeyEnv: DEMO_RELAYER_KEY_ENV },
      },
    }
  } catch (err) {
    await anvil.close()
    throw err
  }
}
