import { expect } from 'vitest'
import { ExactEvmScheme } from '@x402/evm'
import { anvilKey } from '../../src/chain/anvil.js'
import type { PaymentRequired } from '../../src/protocol/x402.js'
import { addEmbeddingModel, P, type Market } from './market.js'
import { hello, newPayer, startChainMarket, USDC, type Chain, type ChainMarket, type Payer } from './chain.js'

// The x402 tests' market: the evm rail on anvil taking x402 payments, and a wallet that pays with them.

export const RELAYER_KEY_ENV = 'SVC_TEST_RELAYER_KEY'
export const NETWORK = 'eip155:31337'

/** A chat completion's body on atlas, with `extra` fields. */
export const body = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'svc/atlas@1', messages: hello, max_tokens: 300, ...extra })

export const decode = <T>(header: string | null): T => JSON.parse(Buffer.from(header!, 'base64').toString('utf8')) as T
export const encode = (v: unknown) => Buffer.from(JSON.stringify(v), 'utf8').toString('base64')

export interface X402Market {
  env: ChainMarket
  c: Chain
  m: Market
  /** A wallet with 3 USDC on chain, no approval and no account: it pays each request with its signature. */
  wallet: Payer
}

/** The market (its relayer anvil's account 8; an embedding model beside the chat ones) and the paying wallet. */
export async function startX402Market(): Promise<X402Market> {
  process.env[RELAYER_KEY_ENV] = anvilKey(8)
  const env = await startChainMarket({}, (cfg) => {
    if (cfg.rail.kind === 'evm') cfg.rail.x402 = { relayerKeyEnv: RELAYER_KEY_ENV }
    addEmbeddingModel(cfg, 'svc/loom@1', [[P.wren, 20_000n]])
  })
  return { env, c: env.c, m: env.m, wallet: await newPayer(env.c, 3n * USDC, 0n) }
}

/** POSTs `payload` to `base` + `path` with `headers`. */
export const postTo = (base: string, path: string, payload: string, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: payload,
  })

/** The payment requirements a keyless chat request of `payload` is answered with (402). */
export async function requirementsOf(m: Market, payload = body()): Promise<PaymentRequired> {
  const res = await postTo(m.url, '/v1/chat/completions', payload)
  expect(res.status).toBe(402)
  return decode<PaymentRequired>(res.headers.get('payment-required'))
}

/** A PAYMENT-SIGNATURE header of `wallet` for the requirements of `payload`, signed by x402's own client scheme. */
export async function signedPayment(m: Market, wallet: Payer, payload = body()): Promise<string> {
  const required = await requirementsOf(m, payload)
  const accepted = required.accepts[0]!
  const signed = await new ExactEvmScheme(wallet.account).createPaymentPayload(2, accepted as never)
  return encode({ x402Version: 2, resource: required.resource, accepted, payload: signed.payload })
}

/** Everything in the ledger balances, to the unit. */
export async function booksBalance(m: Market): Promise<void> {
  const audit = await m.store.ledger.audit()
  expect(audit.unbalanced).toEqual([])
  expect(audit.inconsistent).toEqual([])
}
