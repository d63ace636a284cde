import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addressOf, P, startMarket, type Market } from './helpers/market.js'
import { auditedAtlas, fundAuditor } from './helpers/audits.js'

const AUDITOR = addressOf(0x5f)
const HOUR = 3_600_000

/** When audits run: each auditable offer once an interval, and again as soon as the offer changed. */
describe('audit rounds', () => {
  let m: Market
  let clock = Date.now()
  beforeAll(async () => {
    m = await startMarket({
      now: () => clock,
      edit: (c) => {
        auditedAtlas(c, AUDITOR)
        c.audit!.intervalMs = HOUR
      },
    })
    await fundAuditor(m, AUDITOR, 1_000_000n)
  })
  afterAll(() => m?.close())

  const round = () => m.server.gateway.auditor!.round()
  const audited = async () => (await m.store.audits.list({ limit: 100 })).map((a) => a.provider)

  it('audits each offer of a model with a reference once an interval, never the reference itself', async () => {
    expect(await round()).toBe(1)
    expect(await audited()).toEqual([P.atlasCheap])
    expect(await round()).toBe(0)
    clock += HOUR - 1
    expect(await round()).toBe(0)
    clock += 1
    expect(await round()).toBe(1)
    expect(await audited()).toEqual([P.atlasCheap, P.atlasCheap])
  })

  it('audits an offer again at once when what it serves changed', async () => {
    const [state] = await m.store.audits.states()
    expect(state!.offerSignature).toContain('|atlas|')
    // As if the offer had moved to another endpoint or upstream model since its last audit.
    await m.store.audits.setState({ ...state!, offerSignature: 'another endpoint|atlas-old|vllm-0.6:sim' })
    expect(await round()).toBe(1)
    expect((await m.store.audits.states())[0]!.offerSignature).toBe(state!.offerSignature)
    expect(await round()).toBe(0)
  })
})
