import {
  createPublicClient,
  defineChain,
  getAddress,
  http,
  webSocket,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
} from 'viem'
import { privateKeyToAccount, type LocalAccount } from 'viem/accounts'
import { ConfigError } from '../config.js'
import type { RailConfig } from '../config-schema.js'

export type EvmRailConfig = Extract<RailConfig, { kind: 'evm' }>

export const DEFAULT_OPERATOR_KEY_ENV = 'SVC_OPERATOR_KEY'

/** The evm rail's config with its defaults applied. */
export interface EvmSettings {
  rpcUrl: string
  chainId: number
  usdc: Address
  settler: Address
  operatorKeyEnv: string
  confirmations: number
  /** Where fees go; undefined means the operator's address (known once the key is). */
  feeAccount: Address | undefined
  vendorAccount: Address | undefined
  pollMs: number
  maxLegs: number
  bumpAfterMs: number
}

export function evmSettings(rail: EvmRailConfig): EvmSettings {
  return {
    rpcUrl: rail.rpcUrl,
    chainId: rail.chainId,
    usdc: getAddress(rail.usdc),
    settler: getAddress(rail.settler),
    operatorKeyEnv: rail.operatorKeyEnv ?? DEFAULT_OPERATOR_KEY_ENV,
    confirmations: rail.confirmations ?? 1,
    feeAccount: rail.feeAccount ? getAddress(rail.feeAccount) : undefined,
    vendorAccount: rail.vendorAccount ? getAddress(rail.vendorAccount) : undefined,
    pollMs: rail.pollMs ?? 1000,
    maxLegs: rail.maxLegs ?? 200,
    bumpAfterMs: rail.bumpAfterMs ?? 30_000,
  }
}

/** The operator's key from the environment variable the config names; an Error that says what to set otherwise. */
export function operatorFromEnv(
  s: Pick<EvmSettings, 'operatorKeyEnv'>,
  env: NodeJS.ProcessEnv = process.env,
): LocalAccount {
  const key = env[s.operatorKeyEnv]?.trim()
  if (!key)
    throw new ConfigError(
      [`${s.operatorKeyEnv}: the evm rail needs the operator's private key in this environment variable`],
      'environment',
    )
  if (!/^0x[0-9a-fA-F]{64}$/.test(key))
    throw new ConfigError([`${s.operatorKeyEnv}: must be a private key, 0x followed by 64 hex digits`], 'environment')
  return privateKeyToAccount(key as Hex)
}

export function chainOf(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: chainId === 84532 ? 'Base Sepolia' : chainId === 31337 ? 'Anvil' : `chain ${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  })
}

/** A read client; JSON-RPC calls of one tick are batched into one HTTP request. */
export function publicClientFor(rpcUrl: string, chainId: number, pollMs = 1000): PublicClient {
  const transport = /^wss?:/.test(rpcUrl) ? webSocket(rpcUrl) : http(rpcUrl, { batch: true, retryCount: 2 })
  return createPublicClient({ chain: chainOf(chainId, rpcUrl), transport, pollingInterval: pollMs })
}

/** A read client for a node whose chain id is not known beforehand (the deploy command). */
export async function connect(rpcUrl: string, pollMs = 1000): Promise<PublicClient> {
  const probe = createPublicClient({ transport: /^wss?:/.test(rpcUrl) ? webSocket(rpcUrl) : http(rpcUrl) })
  return publicClientFor(rpcUrl, await probe.getChainId(), pollMs)
}

/** Well-known USDC deployments the deploy command uses instead of a test token. */
export const KNOWN_USDC: Record<number, Address> = {
  84532: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', // Base Sepolia (Circle)
}

/** Chains where `svc chain deploy` deploys the test token: local development chains. */
export const LOCAL_CHAIN_IDS = new Set([31337, 1337])
