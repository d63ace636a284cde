import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { startServer } from '../src/server.js'
import { openStore } from '../src/store/open.js'
import { hasAnvil } from './helpers/chain.js'
import { body, booksBalance, postTo, signedPayment, startX402Market, type X402Market } from './helpers/x402.js'

describe.skipIf(!hasAnvil)('x402 across gateways of one store (anvil)', () => {
  let x: X402Market | undefined
  beforeEach(async () => {
    x = await startX402Market()
  })
  afterEach(() => x?.env.close())

  it('serves one payment once when it reaches two gateways of one store at once', async () => {
    const { m, wallet } = x!
    const store2 = await openStore(m.config.store)
    const second = await startServer(
      { ...m.config, listen: { host: '127.0.0.1', port: 0 } },
      { store: store2, log: () => {} },
    )
    try {
      const to = (base: string, header: string) =>
        postTo(base, '/v1/chat/completions', body(), { 'payment-signature': header })
      // Each gateway serves a payment of its own.
      expect((await to(second.url, await signedPayment(m, wallet))).status).toBe(200)
      const header = await signedPayment(m, wallet)
      const both = await Promise.all([to(m.url, header), to(second.url, header)])
      expect(both.map((r) => r.status).sort()).toEqual([200, 402])
      const refused = both.find((r) => r.status === 402)!
      expect((await refused.json()).error.message).toMatch(/paid for another request already|used already/)
      await booksBalance(m)
    } finally {
      await second.close()
      await store2.close()
    }
  })
})
