import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Config } from '../../config-schema.js'
import { anvilAccount, anvilKey, startAnvil, type Anvil } from '../../chain/anvil.js'
import { publicClientFor } from '../../chain/client.js'
import { approveSettler, deploySettler, deployTestUsdc, mintUsdc, walletFor } from '../../chain/deploy.js'
import { DEMO_WALLET } from './market.js'

/** The demo's operator key lives in its own variable so a real SVC_OPERATOR_KEY is never confused with it. */
export const DEMO_OPERATOR_KEY_ENV = 'SVC_DEMO_OPERATOR_KEY'
/** Anvil accounts of the demo: 0 is the demo wallet, 1–4 the providers, 5 the fee account, 9 the operator. */
const OPERATOR_INDEX = 9
const FEE_INDEX = 5

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
    const client = publicClientFor(anvil.rpcUrl, anvil.chainId, 100)
    const operator = walletFor(client, anvilAccount(OPERATOR_INDEX))
    const usdc = await deployTestUsdc(client, operator)
    const settler = await deploySettler(client, operator, usdc, operator.account.address)
    await mintUsdc({ client, minter: operator, usdc, to: DEMO_WALLET, amount: funds })
    await approveSettler({ client, payer: walletFor(client, anvilAccount(0)), usdc, settler, amount: cap })
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
      },
    }
  } catch (err) {
    await anvil.close()
    throw err
  }
}
