import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { wrapFetchWithPaymentFromConfig } from '@x402/fetch'
import { ExactEvmScheme } from '@x402/evm'
import { anvilAccount } from '../src/chain/anvil.js'
import { parseUsdc } from '../src/money/usdc.js'
import { prepaidAddress } from '../src/store/x402.js'
import type { PaymentRequired } from '../src/protocol/x402.js'
import { chat, type Market } from './helpers/market.js'
import { signIn } from './helpers/portal.js'
import { signersOf } from './helpers/receipts.js'
import { verifyReceipt } from '../src/receipts/verify.js'
import { balanceOf, hasAnvil, newPayer, type Chain, type ChainMarket, type Payer } from './helpers/chain.js'
import * as x402 from './helpers/x402.js'
import { body, decode, encode, NETWORK, startX402Market } from './helpers/x402.js'

const costOf = (svc: { cost_usdc: string }) => parseUsdc(svc.cost_usdc)!

describe.skipIf(!hasAnvil)('x402: a wallet pays per request, no key (anvil)', () => {
  let env: ChainMarket | undefined
  let c: Chain
  let m: Market
  let wallet: Payer
  /** The PAYMENT-SIGNATURE headers the x402 client sent, in order. */
  let sent: string[]
  let pay: typeof fetch

  beforeEach(async () => {
    ;({ env, c, m, wallet } = await startX402Market())
    sent = []
    const recording: typeof fetch = (input, init) => {
      const req = new Request(input, init)
      const sig = req.headers.get('payment-signature')
      if (sig) sent.push(sig)
      return fetch(req)
    }
    pay = wrapFetchWithPaymentFromConfig(recording, {
      schemes: [{ network: NETWORK, client: new ExactEvmScheme(wallet.account) }],
      spendControls: { allowedAssets: [{ network: NETWORK, asset: c.usdc }] },
    }) as typeof fetch
  })
  afterEach(() => env?.close())

  const post = (path: string, payload: string, headers: Record<string, string> = {}) =>
    x402.postTo(m.url, path, payload, headers)
  const paid = (path: string, payload: string) =>
    pay(`${m.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload })
  const requirementsOf = (payload = body()) => x402.requirementsOf(m, payload)
  const booksBalance = () => x402.booksBalance(m)

  it('answers a keyless request 402 with the requirements for its maximum cost; a keyed one as before', async () => {
    const res = await post('/v1/chat/completions', body())
    expect(res.status).toBe(402)
    expect(res.headers.get('x-request-id')).toBeTruthy()
    const err = (await res.json()).error
    expect(err.code).toBe('insufficient_quota')
    expect(err.message).toMatch(/x402/)
    const required = decode<PaymentRequired>(res.headers.get('payment-required'))
    expect(required.x402Version).toBe(2)
    expect(required.resource.url).toBe(`${m.url}/v1/chat/completions`)
    expect(required.accepts).toHaveLength(1)
    const [a] = required.accepts
    expect(a).toMatchObject({
      scheme: 'exact',
      network: NETWORK,
      asset: c.usdc,
      payTo: c.settler,
      maxTimeoutSeconds: 300,
      extra: { name: 'USD Coin', version: '2' },
    })
    // The admission rule's maximum: the same figure a key's refusal names.
    const max = BigInt(a!.amount)
    expect(max).toBeGreaterThan(0n)
    const bigger = decode<PaymentRequired>(
      (await post('/v1/chat/completions', body({ max_tokens: 600 }))).headers.get('payment-required'),
    )
    expect(BigInt(bigger.accepts[0]!.amount)).toBeGreaterThan(max)
    // With a key nothing changes.
    const keyed = await chat(m.url, m.key, JSON.parse(body()))
    expect(keyed.status).toBe(200)
    expect(keyed.headers.get('payment-required')).toBeNull()
    // A wrong key is still a wrong key, not a payment to ask for.
    expect((await chat(m.url, 'svc_test_wrong', JSON.parse(body()))).status).toBe(401)
  })

  it('serves a paid plain request, charges what it delivered, and returns the rest in the next batch', async () => {
    const before = await balanceOf(c, wallet.address)
    const max = BigInt((await requirementsOf()).accepts[0]!.amount)
    const res = await paid('/v1/chat/completions', body())
    expect(res.status).toBe(200)
    const settle = decode<{ success: boolean; transaction: string; network: string; payer: string }>(
      res.headers.get('payment-response'),
    )
    expect(settle).toMatchObject({ success: true, network: NETWORK, payer: wallet.address })
    expect(settle.transaction).toMatch(/^0x[0-9a-f]{64}$/)
    const reply = await res.json()
    expect(reply.choices[0].message.content.length).toBeGreaterThan(0)
    const cost = costOf(reply.svc)
    expect(cost).toBeGreaterThan(0n)
    expect(cost).toBeLessThanOrEqual(max)
    // The authorized maximum left the wallet; the prepaid account holds what the request did not cost.
    expect(await balanceOf(c, wallet.address)).toBe(before - max)
    const prepaid = (await m.store.accounts.byAddress(prepaidAddress(wallet.address)))!
    expect(prepaid).toMatchObject({ kind: 'prepaid', balance: max - cost, held: 0n })
    const usage = await m.store.usage.get(prepaid.id, reply.svc.request_id)
    expect(usage?.cost).toBe(cost)
    await booksBalance()
    // The next batch pays the provider from the contract and returns the rest to the wallet: it paid the cost, no more.
    const report = await m.server.settler.runOnce()
    expect(report.batches).toHaveLength(1)
    expect(await balanceOf(c, wallet.address)).toBe(before - cost)
    expect(await balanceOf(c, c.settler)).toBe(0n)
    expect((await m.store.accounts.byId(prepaid.id))!.balance).toBe(0n)
    await booksBalance()
  })

  it('serves a paid stream and a paid Responses request, each charged what it delivered', async () => {
    const before = await balanceOf(c, wallet.address)
    const stream = await paid('/v1/chat/completions', body({ stream: true, stream_options: { include_usage: true } }))
    expect(stream.status).toBe(200)
    expect(stream.headers.get('payment-response')).toBeTruthy()
    const text = await stream.text()
    const chunks = text
      .split('\n\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)))
    const svc = chunks.find((ch) => ch.svc && ch.svc.cost_usdc)?.svc
    expect(text.trim().endsWith('data: [DONE]')).toBe(true)
    const streamCost = costOf(svc)
    const responses = await paid(
      '/v1/responses',
      JSON.stringify({ model: 'svc/atlas@1', input: 'Hello', max_output_tokens: 200 }),
    )
    expect(responses.status).toBe(200)
    const r = await responses.json()
    expect(r.status).toBe('completed')
    const responsesCost = costOf(r.svc)
    // A keyless response is not kept: no later request can name it.
    expect(
      (
        await post(
          '/v1/responses',
          JSON.stringify({ model: 'svc/atlas@1', input: 'again', previous_response_id: r.id }),
        )
      ).status,
    ).not.toBe(200)
    await m.server.settler.runOnce()
    expect(await balanceOf(c, wallet.address)).toBe(before - streamCost - responsesCost)
    expect(await balanceOf(c, c.settler)).toBe(0n)
    await booksBalance()
  })

  it('pays for embeddings the same way, charged their input and the rest returned', async () => {
    const before = await balanceOf(c, wallet.address)
    const payload = JSON.stringify({ model: 'svc/loom@1', input: ['one', 'two'] })
    const unpaid = await post('/v1/embeddings', payload)
    expect(unpaid.status).toBe(402)
    expect(decode<PaymentRequired>(unpaid.headers.get('payment-required')).resource.url).toBe(`${m.url}/v1/embeddings`)
    const res = await paid('/v1/embeddings', payload)
    expect(res.status).toBe(200)
    expect(res.headers.get('payment-response')).toBeTruthy()
    const reply = await res.json()
    expect(reply.data).toHaveLength(2)
    await m.server.settler.runOnce()
    expect(await balanceOf(c, wallet.address)).toBe(before - costOf(reply.svc))
    await booksBalance()
  })

  it('serves one payment once: a replay, sequential or concurrent, gets a clear 402', async () => {
    const first = await paid('/v1/chat/completions', body())
    expect(first.status).toBe(200)
    const header = sent.at(-1)!
    const again = await post('/v1/chat/completions', body(), { 'payment-signature': header })
    expect(again.status).toBe(402)
    expect((await again.json()).error.message).toMatch(/paid for another request already|used already/)
    expect(again.headers.get('payment-required')).toBeTruthy()
    // A fresh payment sent twice at once: one is served.
    const twice = await x402.signedPayment(m, wallet)
    const both = await Promise.all([
      post('/v1/chat/completions', body(), { 'payment-signature': twice }),
      post('/v1/chat/completions', body(), { 'payment-signature': twice }),
    ])
    expect(both.map((r) => r.status).sort()).toEqual([200, 402])
    await booksBalance()
  })

  it('refuses a payment for less than the maximum cost, an expired one and a wrongly signed one, moving nothing', async () => {
    const before = await balanceOf(c, wallet.address)
    const required = await requirementsOf()
    const accepted = required.accepts[0]!
    const scheme = new ExactEvmScheme(wallet.account)
    const send = async (payload: unknown, acceptedAs = accepted) => {
      const res = await post('/v1/chat/completions', body(), {
        'payment-signature': encode({ x402Version: 2, resource: required.resource, accepted: acceptedAs, payload }),
      })
      expect(res.status).toBe(402)
      expect(res.headers.get('payment-required')).toBeTruthy()
      return (await res.json()).error.message as string
    }
    const less = { ...accepted, amount: (BigInt(accepted.amount) - 1n).toString() }
    expect(await send((await scheme.createPaymentPayload(2, less as never)).payload, less)).toMatch(
      /less than this request's maximum cost/,
    )
    const short = { ...accepted, maxTimeoutSeconds: 2 }
    expect(await send((await scheme.createPaymentPayload(2, short as never)).payload, short)).toMatch(/expired/)
    const good = (await scheme.createPaymentPayload(2, accepted as never)).payload as {
      authorization: { value: string }
      signature: string
    }
    const tampered = {
      ...good,
      authorization: { ...good.authorization, value: (BigInt(accepted.amount) + 5n).toString() },
    }
    expect(await send(tampered)).toMatch(/signature is not the payer's/)
    const other = (await scheme.createPaymentPayload(2, { ...accepted, payTo: anvilAccount(3).address } as never))
      .payload
    expect(await send(other)).toMatch(/settlement contract/)
    expect(await send({ nonsense: true })).toMatch(/could not be read/)
    expect(await balanceOf(c, wallet.address)).toBe(before)
    expect(await m.store.accounts.byAddress(prepaidAddress(wallet.address))).toBeUndefined()
  })

  it('refuses a payment its wallet cannot cover before any transfer', async () => {
    const poor = await newPayer(c, 10n, 0n)
    const required = await requirementsOf()
    const accepted = required.accepts[0]!
    const signed = await new ExactEvmScheme(poor.account).createPaymentPayload(2, accepted as never)
    const res = await post('/v1/chat/completions', body(), {
      'payment-signature': encode({ x402Version: 2, resource: required.resource, accepted, payload: signed.payload }),
    })
    expect(res.status).toBe(402)
    expect((await res.json()).error.message).toMatch(/wallet holds 0.000010 USDC/)
    expect(await m.store.x402.payments(poor.address)).toEqual([])
  })

  it('shows the wallet its x402 requests and receipts in the portal, and each receipt verifies on chain', async () => {
    const res = await paid('/v1/chat/completions', body())
    const reply = await res.json()
    await m.server.settler.runOnce()
    const portal = await signIn(m.url, wallet.account as Parameters<typeof signIn>[1])
    const x402 = await (await portal.call('GET', '/x402')).json()
    expect(x402.account).toMatchObject({
      address: prepaidAddress(wallet.address),
      held_usdc: '0.000000',
      to_return_usdc: '0.000000',
    })
    expect(x402.payments).toEqual([expect.objectContaining({ request_id: reply.svc.request_id, status: 'settled' })])
    // Its own account (opened by the sign-in) has no requests; its x402 view has the paid one.
    expect((await (await portal.call('GET', '/usage')).json()).data).toEqual([])
    const usage = await (await portal.call('GET', '/usage?account=x402')).json()
    expect(usage.data.map((u: { request_id: string }) => u.request_id)).toEqual([reply.svc.request_id])
    const summary = await (await portal.call('GET', '/usage/summary?account=x402')).json()
    expect(summary.totals.cost_usdc).toBe(reply.svc.cost_usdc)
    expect((await portal.call('GET', '/usage?account=other')).status).toBe(400)
    const file = await (await portal.call('GET', `/usage/${reply.svc.request_id}/receipt?account=x402`)).json()
    expect(file.receipt).toMatchObject({ payer: wallet.address, key_id: 'x402', cost: costOf(reply.svc).toString() })
    const verdict = await verifyReceipt({
      signed: file,
      signers: await signersOf(m.url),
      proof: file.proof,
      chain: c.client,
    })
    expect(verdict.checks.map((k) => [k.name, k.ok])).toEqual([
      ['signature', true],
      ['leaf', true],
      ['proof', true],
      ['chain', true],
    ])
  })
})
