import { getAddress, parseSignature, verifyTypedData, type Address, type Hex, type PublicClient } from 'viem'
import type { LocalAccount } from 'viem/accounts'
import type { Authorization, PaymentPayload, PaymentRequirements } from '../protocol/x402.js'
import { formatUsdc } from '../money/usdc.js'
import { usdcAbi } from './contracts.js'
import { walletFor, type Wallet } from './deploy.js'

/** EIP-3009's signed message (the token's EIP-712 domain is its name, version, chain id and address). */
const AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const

/**
 * Seconds an authorization must stay valid after it arrives: its transfer is sent and mined within them, or it could
 * expire on its way and the request would have been admitted on a payment that never arrives.
 */
export const MIN_VALID_SECONDS = 10

/** A payment that passed every check before its transfer: what the gateway claims and then moves on chain. */
export interface CheckedPayment {
  payer: Address
  nonce: Hex
  amount: bigint
  validBefore: number
  authorization: Authorization
  signature: Hex
}

export type Transfer = { ok: true; txHash: Hex } | { ok: false; why: string; txHash?: Hex }

/**
 * The gateway as its own x402 facilitator on the evm rail (docs/architecture.md §4a): it states what it accepts, checks
 * a signed EIP-3009 authorization against it and against the chain, and sends the transfer to the settlement contract
 * itself, paying the gas with the relayer's key.
 */
export class X402Relay {
  readonly network: string
  private domain: { name: string; version: string } | undefined
  private readonly wallet: Wallet

  constructor(
    private readonly o: {
      client: PublicClient
      usdc: Address
      settler: Address
      chainId: number
      relayer: LocalAccount
      maxTimeoutSeconds: number
      /** Milliseconds since the epoch. */
      now: () => number
    },
  ) {
    this.network = `eip155:${o.chainId}`
    this.wallet = walletFor(o.client, o.relayer)
  }

  /** The token's EIP-712 domain name and version, read once from the token. */
  async tokenDomain(): Promise<{ name: string; version: string }> {
    if (this.domain) return this.domain
    const [name, version] = await Promise.all([
      this.o.client.readContract({ address: this.o.usdc, abi: usdcAbi, functionName: 'name' }),
      this.o.client.readContract({ address: this.o.usdc, abi: usdcAbi, functionName: 'version' }),
    ])
    return (this.domain = { name, version })
  }

  /** What a request of maximum cost `amount` must be paid with. */
  async requirements(amount: bigint): Promise<PaymentRequirements> {
    return {
      scheme: 'exact',
      network: this.network,
      asset: this.o.usdc,
      amount: amount.toString(),
      payTo: this.o.settler,
      maxTimeoutSeconds: this.o.maxTimeoutSeconds,
      extra: await this.tokenDomain(),
    }
  }

  /**
   * Checks a payment for a request of maximum cost `due`, before any work: what it pays and to whom, its window, its
   * signature, and on chain that its nonce is unused and the payer's wallet covers it. The reason it is refused, as
   * the client is told, otherwise.
   */
  async check(p: PaymentPayload, due: bigint): Promise<CheckedPayment | string> {
    const a = p.payload.authorization
    if (p.accepted.scheme !== 'exact') return `the scheme "${p.accepted.scheme}" is not accepted; pay with "exact"`
    if (p.accepted.network !== this.network)
      return `the network ${p.accepted.network} is not accepted; pay on ${this.network}`
    if (!same(p.accepted.asset, this.o.usdc)) return `the asset must be the settlement token ${this.o.usdc}`
    if (!same(a.to, this.o.settler) || !same(p.accepted.payTo, this.o.settler))
      return `the payment must be made to the settlement contract ${this.o.settler}`
    const amount = BigInt(a.value)
    if (amount < due)
      return `the payment of ${formatUsdc(amount)} USDC is less than this request's maximum cost, ${formatUsdc(due)} USDC`
    const now = Math.floor(this.o.now() / 1000)
    if (BigInt(a.validAfter) > BigInt(now)) return 'the authorization is not valid yet (validAfter is in the future)'
    if (BigInt(a.validBefore) < BigInt(now + MIN_VALID_SECONDS))
      return `the authorization has expired, or expires within ${MIN_VALID_SECONDS} s (validBefore)`
    const payer = getAddress(a.from)
    const signature = p.payload.signature as Hex
    const message = {
      from: payer,
      to: getAddress(a.to),
      value: amount,
      validAfter: BigInt(a.validAfter),
      validBefore: BigInt(a.validBefore),
      nonce: a.nonce as Hex,
    }
    const domain = { ...(await this.tokenDomain()), chainId: this.o.chainId, verifyingContract: this.o.usdc }
    const signed = await verifyTypedData({
      address: payer,
      domain,
      types: AUTHORIZATION_TYPES,
      primaryType: 'TransferWithAuthorization',
      message,
      signature,
    }).catch(() => false)
    if (!signed) return `the signature is not the payer's (${payer}) over this authorization`
    if (await this.used(payer, message.nonce)) return 'this payment was used already (its nonce is spent on chain)'
    const balance = await this.o.client.readContract({
      address: this.o.usdc,
      abi: usdcAbi,
      functionName: 'balanceOf',
      args: [payer],
    })
    if (balance < amount)
      return `the payer's wallet holds ${formatUsdc(balance)} USDC, less than the payment of ${formatUsdc(amount)} USDC`
    return {
      payer,
      nonce: message.nonce,
      amount,
      validBefore: Number(a.validBefore),
      authorization: a,
      signature,
    }
  }

  /** Whether the authorization's nonce is spent on chain (its transfer happened). */
  async used(payer: Address, nonce: Hex): Promise<boolean> {
    return this.o.client.readContract({
      address: this.o.usdc,
      abi: usdcAbi,
      functionName: 'authorizationState',
      args: [payer, nonce],
    })
  }

  /**
   * Sends `transferWithAuthorization` and waits until it is mined: ok only with a successful receipt. A send or wait
   * that fails says why; whether the transfer happened after all is the chain's to say (`used`).
   */
  async transfer(c: CheckedPayment): Promise<Transfer> {
    const { r, s, yParity } = parseSignature(c.signature)
    const a = c.authorization
    let txHash: Hex
    try {
      txHash = await this.wallet.writeContract({
        address: this.o.usdc,
        abi: usdcAbi,
        functionName: 'transferWithAuthorization',
        args: [
          c.payer,
          getAddress(a.to),
          c.amount,
          BigInt(a.validAfter),
          BigInt(a.validBefore),
          c.nonce,
          yParity + 27,
          r,
          s,
        ],
      })
    } catch (err) {
      return { ok: false, why: `the transfer was not accepted by the node: ${shortError(err)}` }
    }
    const timeout = Math.max(1000, c.validBefore * 1000 - this.o.now())
    try {
      const receipt = await this.o.client.waitForTransactionReceipt({ hash: txHash, pollingInterval: 100, timeout })
      if (receipt.status === 'success') return { ok: true, txHash }
      return { ok: false, why: 'the transfer reverted on chain', txHash }
    } catch (err) {
      return { ok: false, why: `the transfer was not seen mined: ${shortError(err)}`, txHash }
    }
  }
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase()

function shortError(err: unknown): string {
  const e = err as { shortMessage?: string; message?: string }
  const m = e.shortMessage ?? e.message ?? String(err)
  return m.split('\n')[0]!
}
