import { apiError, type ApiError } from '../protocol/errors.js'
import {
  decodePaymentSignature,
  encodeHeader,
  PAYMENT_REQUIRED_HEADER,
  PAYMENT_RESPONSE_HEADER,
  X402_VERSION,
  type SettleResponse,
} from '../protocol/x402.js'
import { formatUsdc } from '../money/usdc.js'
import type { Caller } from '../auth/caller.js'
import type { X402Relay, CheckedPayment } from '../chain/x402-relay.js'
import type { X402Repo } from '../store/x402.js'
import { MAX_STORED } from '../store/chain.js'
import { maxCostOf, type Admissible } from './admission.js'

/** What a keyless request brings to be paid with: its `PAYMENT-SIGNATURE` header, if any, and its URL. */
export interface KeylessCall {
  signature: string | undefined
  /** The request's URL, as the requirements name the resource. */
  url: string
}

/** The caller of a keyless request before it paid: no key, no account. */
export const KEYLESS: Caller = Object.freeze({ keyId: 'x402', accountId: 0, address: '' })

/** A keyless request paid for: the prepaid account it is served on, and the payment to mark once it is admitted. */
export interface Paid {
  caller: Caller
  payment: CheckedPayment
}

/**
 * Pays for a keyless request with x402 before any work (docs/architecture.md §4a): the payment is checked against the
 * request's maximum cost (the admission rule), claimed in the store by payer and nonce, transferred to the settlement
 * contract and mined, then credited to the payer's prepaid account, whose hold the request then takes. Every refusal
 * is a 402 `insufficient_quota` carrying the requirements again, so a client can pay anew.
 */
export class X402Payments {
  constructor(
    private readonly o: {
      relay: X402Relay
      store: X402Repo
      now: () => number
      log: (msg: string, err?: unknown) => void
    },
  ) {}

  async pay(
    requestId: string,
    prepared: Admissible,
    call: KeylessCall,
    headers: (h: Record<string, string>) => void,
  ): Promise<Paid | ApiError> {
    const due = maxCostOf(prepared)
    if (due > MAX_STORED)
      return apiError(
        'insufficient_quota',
        'This request could cost more than any payment can cover; lower max_tokens.',
      )
    const required = async (why: string) => {
      headers({
        [PAYMENT_REQUIRED_HEADER]: encodeHeader({
          x402Version: X402_VERSION,
          error: why,
          resource: { url: call.url, description: `${prepared.model}, up to ${formatUsdc(due)} USDC`, mimeType: '' },
          accepts: [await this.o.relay.requirements(due)],
        }),
      })
      return apiError(
        'insufficient_quota',
        `${why}. This request could cost up to ${formatUsdc(due)} USDC; pay it with x402 (the PAYMENT-REQUIRED header says how) or send an API key. Nothing was charged.`,
      )
    }
    if (call.signature === undefined) return required('No API key was sent: this request must be paid with x402')
    const payload = decodePaymentSignature(call.signature)
    if (typeof payload === 'string') return required(`The x402 payment could not be read: ${payload}`)
    const checked = await this.o.relay.check(payload, due)
    if (typeof checked === 'string') return required(`The x402 payment was refused: ${checked}`)
    const { payer, nonce } = checked
    const claimed = await this.o.store.claim({
      payer,
      nonce,
      requestId,
      amount: checked.amount,
      validBefore: checked.validBefore,
      now: this.o.now(),
    })
    if (!claimed)
      return required('The x402 payment was refused: it has paid for another request already; sign a new one')
    const sent = await this.o.relay.transfer(checked)
    if (!sent.ok) {
      // Whether it moved after all is the chain's to say: one that did is credited, and so refunded, never lost.
      const moved = await this.o.relay.used(payer, nonce).catch(() => undefined)
      if (moved === false) {
        await this.o.store.failed(payer, nonce, sent.why, this.o.now())
        return required(`The x402 payment's transfer failed: ${sent.why}`)
      }
      if (moved === true) {
        await this.o.store.credit(payer, nonce, sent.txHash ?? 'unknown', this.o.now())
        return required(
          'The x402 payment arrived too late to serve this request; it is returned to the payer in the next settlement batch',
        )
      }
      // Undecided: the settler's pass asks the chain again later (`X402Payments.reconcile`).
      this.o.log(`request ${requestId}: the x402 transfer of ${payer} nonce ${nonce} is undecided: ${sent.why}`)
      return required(
        'The x402 payment could not be confirmed on chain in time; if it arrives, it is returned to the payer in the next settlement batch',
      )
    }
    const txHash = sent.txHash
    const accountId = await this.o.store.credit(payer, nonce, txHash, this.o.now())
    if (accountId === null)
      throw new Error(`x402 payment ${payer}/${nonce} was claimed by ${requestId} but not credited`)
    const settle: SettleResponse = { success: true, transaction: txHash, network: this.o.relay.network, payer }
    headers({ [PAYMENT_RESPONSE_HEADER]: encodeHeader(settle) })
    return { caller: { keyId: 'x402', accountId, address: payer }, payment: checked }
  }

  /**
   * Decides the claimed payments whose transfer a crash or a lost answer left undecided for `afterMs`: one the chain
   * shows used is credited (no request was served on it: it is refunded in the next batch); one unused past its window
   * can no longer move and failed. How many it decided.
   */
  async reconcile(afterMs = 120_000): Promise<number> {
    const now = this.o.now()
    let decided = 0
    for (const p of await this.o.store.undecided(now - afterMs)) {
      const moved = await this.o.relay.used(p.payer as `0x${string}`, p.nonce as `0x${string}`)
      if (moved) await this.o.store.credit(p.payer, p.nonce, p.txHash ?? 'unknown', now)
      else if (p.validBefore * 1000 < now) await this.o.store.failed(p.payer, p.nonce, 'expired unsent', now)
      else continue
      decided++
    }
    return decided
  }

  /** The paid request was admitted or refused: what its hold leaves is its account's to refund from now on. */
  async admitted(paid: Paid): Promise<void> {
    await this.o.store.settled(paid.payment.payer, paid.payment.nonce, this.o.now())
  }
}
