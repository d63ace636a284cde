import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Address, Hex } from 'viem'
import { X402Payments } from './x402-payment.js'
import type { Prepared } from './prepare.js'
import type { CheckedPayment, Transfer, X402Relay } from '../chain/x402-relay.js'
import { prepaidAddress } from '../store/x402.js'
import type { Store } from '../store/store.js'
import type { PaymentRequirements } from '../protocol/x402.js'
import { closeFixture, openFixture, type StoreFixture } from '../../test/helpers/store-fixture.js'

const PAYER = '0x7777777777777777777777777777777777777777' as Address
const NONCE = `0x${'ab'.repeat(32)}` as Hex
/** A request whose maximum cost is 1,000 input tokens at 1 USDC per Mtok: 1,000 base units. */
const PREPARED = {
  model: 'svc/atlas@1',
  inputTokens: 1000,
  maxTokens: 0,
  plan: { ceiling: { input: 1_000_000n, output: 1_000_000n } },
} as unknown as Prepared

/** A relay whose every check passes and whose transfer and chain answers the test sets. */
class FakeRelay {
  readonly network = 'eip155:31337'
  transferred: Transfer = { ok: true, txHash: `0x${'11'.repeat(32)}` }
  onChain: boolean | Error = false
  async requirements(amount: bigint): Promise<PaymentRequirements> {
    return {
      scheme: 'exact',
      network: this.network,
      asset: '0x0000000000000000000000000000000000000001',
      amount: amount.toString(),
      payTo: '0x0000000000000000000000000000000000000002',
      maxTimeoutSeconds: 300,
      extra: { name: 'USD Coin', version: '2' },
    }
  }
  async check(_p: unknown, due: bigint): Promise<CheckedPayment> {
    return {
      payer: PAYER,
      nonce: NONCE,
      amount: due,
      validBefore: 2_000,
      authorization: {
        from: PAYER,
        to: PAYER,
        value: due.toString(),
        validAfter: '0',
        validBefore: '2000',
        nonce: NONCE,
      },
      signature: '0x',
    }
  }
  async transfer(): Promise<Transfer> {
    return this.transferred
  }
  async used(): Promise<boolean> {
    if (this.onChain instanceof Error) throw this.onChain
    return this.onChain
  }
}

const header = Buffer.from(
  JSON.stringify({
    x402Version: 2,
    accepted: { scheme: 'exact', network: 'eip155:31337' },
    payload: {
      signature: `0x${'1'.repeat(130)}`,
      authorization: { from: PAYER, to: PAYER, value: '1000', validAfter: '0', validBefore: '2000', nonce: NONCE },
    },
  }),
).toString('base64')

/** Each failure between check, claim, transfer and credit: never served, never lost. */
describe('x402 payments when the transfer goes wrong', () => {
  let f: StoreFixture | undefined
  let store: Store
  let relay: FakeRelay
  let now: number
  let payments: X402Payments
  let headers: Record<string, string>

  beforeEach(async () => {
    f = await openFixture('sqlite')
    store = f.store
    relay = new FakeRelay()
    now = 1_000_000
    payments = new X402Payments({
      relay: relay as unknown as X402Relay,
      store: store.x402,
      now: () => now,
      log: () => {},
    })
    headers = {}
  })
  afterEach(() => closeFixture(f))

  const pay = (requestId = 'req_1') =>
    payments.pay(requestId, PREPARED, { signature: header, url: 'http://x/v1/chat/completions' }, (h) =>
      Object.assign(headers, h),
    )
  const prepaid = () => store.accounts.byAddress(prepaidAddress(PAYER))

  it('serves a mined payment on the prepaid account it credited, and says so in PAYMENT-RESPONSE', async () => {
    const paid = await pay()
    expect(paid).toMatchObject({ caller: { keyId: 'x402', address: PAYER } })
    expect(headers['payment-response']).toBeTruthy()
    expect(await prepaid()).toMatchObject({ balance: 1000n })
    // The same payment again: refused, with the requirements to pay anew.
    headers = {}
    expect(await pay('req_2')).toMatchObject({ code: 'insufficient_quota' })
    expect(headers['payment-required']).toBeTruthy()
    expect((await prepaid())!.balance).toBe(1000n)
  })

  it('refuses a payment whose transfer failed and moved nothing, and records it failed', async () => {
    relay.transferred = { ok: false, why: 'the transfer reverted on chain', txHash: `0x${'22'.repeat(32)}` }
    const res = await pay()
    expect(res).toMatchObject({ code: 'insufficient_quota', message: expect.stringMatching(/transfer failed/) })
    expect(await prepaid()).toBeUndefined()
    expect(await store.x402.payment(PAYER, NONCE)).toMatchObject({ status: 'failed' })
  })

  it('credits a transfer mined too late to serve, so the next batch returns it whole', async () => {
    relay.transferred = { ok: false, why: 'the transfer was not seen mined', txHash: `0x${'33'.repeat(32)}` }
    relay.onChain = true
    const res = await pay()
    expect(res).toMatchObject({ code: 'insufficient_quota', message: expect.stringMatching(/returned to the payer/) })
    const account = (await prepaid())!
    expect(account.balance).toBe(1000n)
    await store.x402.settled(PAYER, NONCE, now)
    const batch = (await store.settlement.createBatch({ id: 'bat_1', feeAccountId: f!.fees, now }))!
    expect(await store.settlement.legs(batch.id)).toEqual([{ payerId: account.id, payeeId: account.id, amount: 1000n }])
  })

  it('leaves an undecided transfer claimed, then decides it by the chain once it is old', async () => {
    relay.transferred = { ok: false, why: 'the node did not answer' }
    relay.onChain = new Error('node down')
    expect(await pay()).toMatchObject({ code: 'insufficient_quota' })
    expect(await store.x402.payment(PAYER, NONCE)).toMatchObject({ status: 'claimed' })
    relay.onChain = true
    expect(await payments.reconcile()).toBe(0)
    now += 120_000
    expect(await payments.reconcile()).toBe(1)
    expect(await store.x402.payment(PAYER, NONCE)).toMatchObject({ status: 'credited' })
    expect((await prepaid())!.balance).toBe(1000n)
  })

  it('fails an undecided transfer the chain shows unused once its window has passed', async () => {
    relay.transferred = { ok: false, why: 'the node did not answer' }
    relay.onChain = new Error('node down')
    await pay()
    relay.onChain = false
    // Still valid (validBefore 2,000 s): it could yet be mined, so it waits.
    now = 1_000_000 + 120_000
    expect(await payments.reconcile()).toBe(0)
    expect(await store.x402.payment(PAYER, NONCE)).toMatchObject({ status: 'claimed' })
    now = 2_000_000 + 1
    expect(await payments.reconcile()).toBe(1)
    expect(await store.x402.payment(PAYER, NONCE)).toMatchObject({ status: 'failed' })
    expect(await prepaid()).toBeUndefined()
  })
})
