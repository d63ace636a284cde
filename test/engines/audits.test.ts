import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Auditor } from '../../src/audit/auditor.js'
import { addressOf, chat, P, type Market } from '../helpers/market.js'
import { engineMarket, modelFile, substituteModelFile } from '../helpers/engine.js'
import { LLAMA_SERVER, startLlamaServer, type LlamaServer } from '../helpers/llama-server.js'
import { checkInvariants } from '../helpers/money.js'
import { fundAuditor } from '../helpers/audits.js'

const AUDITOR = addressOf(0x5c)
const SUBSTITUTE = addressOf(0xa3)
const FUNDS = 2_000_000n

/**
 * Audits of real engines: two llama-servers for one model, one serving it (to its reference offer and to an honest
 * one) and one serving another model in its place. The substitute is quarantined within three audits, traffic and
 * require_verified leave it; the honest offer is verified.
 */
describe.skipIf(!LLAMA_SERVER)('audits of llama-server offers', () => {
  let real: LlamaServer
  let fake: LlamaServer
  let m: Market
  let auditor: Auditor
  let auditAccount: number
  beforeAll(async () => {
    const model = modelFile()
    ;[real, fake] = await Promise.all([startLlamaServer(model), startLlamaServer(substituteModelFile())])
    m = await engineMarket({
      baseUrl: real.url,
      upstreamModel: 'bigram',
      model,
      providers: 2,
      edit: (c) => {
        c.providers.push({
          address: SUBSTITUTE,
          baseUrl: fake.url,
          bundle: 'llamacpp',
          profile: 'cheap',
          // The cheapest offer of atlas: it would win every request on price.
          offers: [
            {
              model: 'svc/atlas@1',
              upstreamModel: 'bigram',
              input_price_per_mtok: '10000',
              output_price_per_mtok: '20000',
              maxConcurrency: 8,
            },
          ],
        })
        c.audit = { wallet: AUDITOR, references: { 'svc/atlas@1': P.atlasDear }, intervalMs: 0 }
      },
    })
    auditor = m.server.gateway.auditor!
    auditAccount = await fundAuditor(m, AUDITOR, FUNDS)
  }, 120_000)
  afterAll(async () => {
    await m?.close()
    await Promise.all([real?.stop(), fake?.stop()])
  })

  const offer = (provider: string) =>
    m.server.gateway.catalog.offers.get('svc/atlas@1')!.find((o) => o.provider === provider)!
  const state = (provider: string) => m.server.gateway.catalog.stateOf(`${provider}|svc/atlas@1`)
  const ask = (provider?: Record<string, unknown>) =>
    chat(m.url, m.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'Say something.' }],
      max_tokens: 8,
      ...(provider ? { provider } : {}),
    })

  it('routes to the cheapest offer before any audit: the substitute', async () => {
    const res = await ask()
    expect(res.status).toBe(200)
    expect((await res.json()).svc.provider).toBe(SUBSTITUTE)
  })

  it('verifies the honest engine and quarantines the substitute within three audits; traffic leaves it', async () => {
    for (let i = 0; i < 3; i++) {
      const honest = await auditor.audit(offer(P.atlasCheap))
      expect(honest, JSON.stringify(honest.evidence)).toMatchObject({ result: 'passed' })
      // The same weights on the same kernels: the same tokens, and log probabilities within the tolerance.
      // The reply ran to its bound (24), counted whole: what the engine reported is what it sent.
      expect(honest.evidence).toMatchObject({ compared: 24, reported: 24, counted: 24 })
      expect((honest.evidence as { meanGap: number }).meanGap).toBeLessThan(0.01)
      const sub = await auditor.audit(offer(SUBSTITUTE))
      expect(sub).toMatchObject({ result: 'failed', reason: 'tokens' })
      expect(sub.evidence).toMatchObject({ divergedAt: 0 })
    }
    expect([state(P.atlasCheap), state(SUBSTITUTE)]).toEqual(['verified', 'quarantined'])
    for (let i = 0; i < 3; i++) {
      const res = await ask()
      expect(res.status).toBe(200)
      expect((await res.json()).svc.provider).not.toBe(SUBSTITUTE)
    }
    const pinned = await ask({ only: [SUBSTITUTE] })
    expect(pinned.status).toBe(503)
    const verified = await ask({ require_verified: true, order: [SUBSTITUTE] })
    expect(verified.status).toBe(200)
    expect((await verified.json()).svc.provider).not.toBe(SUBSTITUTE)
    // Audits were paid by the audit account, to each provider audited and the reference; every invariant holds.
    const records = await m.store.usage.list(auditAccount, { limit: 100 })
    expect(new Set(records.map((r) => r.provider))).toEqual(new Set([P.atlasCheap, SUBSTITUTE, P.atlasDear]))
    expect(records.every((r) => r.outcome === 'completed')).toBe(true)
    await checkInvariants(m.store, auditAccount, FUNDS)
  }, 120_000)
})
