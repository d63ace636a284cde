import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Auditor } from '../src/audit/auditor.js'
import type { Fault } from '../src/providers/simulated/faults.js'
import { addressOf, chat, P, startMarket, type Market } from './helpers/market.js'
import { checkInvariants } from './helpers/money.js'
import { atlasOffer, auditedAtlas, cheating, fundAuditor } from './helpers/audits.js'

const AUDITOR = addressOf(0x5a)
const FUNDS = 5_000_000n

interface Endpoint {
  provider: string
  verification: {
    state: string
    reference: boolean
    audits_1d: { passed: number; failed: number }
    last_audit_at: string | null
  }
}

/**
 * Audits through the real server and store: atlas@1's dear offer is its reference; the cheap one is audited against
 * it, paid by the audit account, and routed by what its audits found.
 */
describe('audits of offers', () => {
  let m: Market
  let auditor: Auditor
  let auditAccount: number
  beforeAll(async () => {
    m = await startMarket({
      sim: { logprobNoiseMilli: 20 },
      edit: (c) => {
        c.models.find((x) => x.id === 'svc/atlas@1')!.tokenizer = 'o200k'
        auditedAtlas(c, AUDITOR)
      },
    })
    auditor = m.server.gateway.auditor!
    auditAccount = await fundAuditor(m, AUDITOR, FUNDS)
  })
  afterAll(() => m?.close())

  const cheap = () => atlasOffer(m, P.atlasCheap)
  const endpoints = async () => {
    const res = await fetch(`${m.url}/v1/models/svc/atlas@1/endpoints`)
    return ((await res.json()) as { data: Endpoint[] }).data
  }
  const stateOf = async (provider: string) => (await endpoints()).find((e) => e.provider === provider)!.verification
  const auditTimes = async (n: number) => {
    const out = []
    for (let i = 0; i < n; i++) out.push(await auditor.audit(cheap()))
    return out
  }
  const underFault = <T>(fault: Fault, run: () => Promise<T>) => cheating(m, fault, run)
  const ask = (provider?: Record<string, unknown>) =>
    chat(m.url, m.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
      ...(provider ? { provider } : {}),
    })

  it('verifies an honest offer with noisy kernels after three audits, paid by the audit account', async () => {
    expect(await stateOf(P.atlasCheap)).toMatchObject({ state: 'unverified', audits_1d: { passed: 0, failed: 0 } })
    expect(await stateOf(P.atlasDear)).toMatchObject({ state: 'verified', reference: true })
    // Before it is verified, require_verified leaves only the reference.
    const early = await ask({ only: [P.atlasCheap], require_verified: true })
    expect(early.status).toBe(503)
    expect((await early.json()).error.message).toContain('provider.require_verified')
    const audits = await auditTimes(3)
    expect(audits.map((a) => a.result)).toEqual(['passed', 'passed', 'passed'])
    expect(await stateOf(P.atlasCheap)).toMatchObject({ state: 'verified', audits_1d: { passed: 3, failed: 0 } })
    // Each audit is a request of the audit account's, charged and paid to the provider like any.
    const records = await m.store.usage.list(auditAccount, { limit: 100 })
    const audited = records.filter((r) => r.provider === P.atlasCheap)
    expect(audited).toHaveLength(3)
    expect(audited.every((r) => r.outcome === 'completed' && r.cost > 0n)).toBe(true)
    // The reference was asked once per prompt used, its answers recorded.
    expect(records.filter((r) => r.provider === P.atlasDear).length).toBeLessThanOrEqual(3)
    // The client was charged nothing for them.
    expect(await m.store.usage.list(m.accountId, { limit: 10 })).toEqual([])
    expect((await m.store.accounts.byId(m.accountId))!.balance).toBe(10_000_000n)
    await checkInvariants(m.store, auditAccount, FUNDS)
    expect((await ask({ only: [P.atlasCheap], require_verified: true })).status).toBe(200)
  })

  it('stays verified through a long run of honest noise', async () => {
    const audits = await auditTimes(12)
    expect(audits.filter((a) => a.result !== 'passed')).toEqual([])
    expect((await stateOf(P.atlasCheap)).state).toBe('verified')
  })

  it('makes a substitute suspect at its first failed audit and quarantines it at its third; traffic leaves it', async () => {
    const [first] = await underFault({ kind: 'substitute' }, () => auditTimes(1))
    expect(first).toMatchObject({ result: 'failed', reason: 'tokens' })
    expect(first!.evidence).toMatchObject({ divergedAt: expect.any(Number), expected: expect.any(String) })
    expect((await stateOf(P.atlasCheap)).state).toBe('suspect')
    // Suspect: the cheaper offer gets a request only when no other can serve.
    const res = await ask()
    expect(res.status).toBe(200)
    expect((await res.json()).svc.provider).toBe(P.atlasDear)
    // Whatever order the preferences ask for.
    const sorted = await ask({ sort: 'latency', order: [P.atlasCheap] })
    expect((await sorted.json()).svc.provider).toBe(P.atlasDear)
    await underFault({ kind: 'substitute' }, () => auditTimes(2))
    expect(await stateOf(P.atlasCheap)).toMatchObject({ state: 'quarantined', audits_1d: { failed: 3 } })
    const pinned = await ask({ only: [P.atlasCheap] })
    expect(pinned.status).toBe(503)
    expect((await pinned.json()).error.code).toBe('no_capacity')
    // Eight passed audits in a row push its failures out of the window: it serves again.
    await auditTimes(7)
    expect((await stateOf(P.atlasCheap)).state).toBe('quarantined')
    await auditTimes(1)
    expect((await stateOf(P.atlasCheap)).state).toBe('suspect')
  })

  it('catches each cheat at its first audit: quantized log probabilities, inflated usage, a truncated reply', async () => {
    const cheats: [Fault, string][] = [
      [{ kind: 'quantized', milli: 300 }, 'logprobs'],
      [{ kind: 'inflate', percent: 50 }, 'usage'],
      [{ kind: 'truncate', tokens: 3 }, 'truncated'],
    ]
    for (const [fault, reason] of cheats) {
      const [audit] = await underFault(fault, () => auditTimes(1))
      expect(audit).toMatchObject({ result: 'failed', reason })
    }
  })

  it('quarantines a provider that cheats on half its requests within six audits', async () => {
    // Clear its record first: ten passed audits.
    await auditTimes(10)
    expect((await stateOf(P.atlasCheap)).state).toBe('verified')
    const audits = await underFault({ kind: 'sometimes', percent: 50, cheat: { kind: 'substitute' } }, () =>
      auditTimes(6),
    )
    expect(audits.filter((a) => a.result === 'failed')).toHaveLength(3)
    expect((await stateOf(P.atlasCheap)).state).toBe('quarantined')
    const metrics = await m.server.gateway.metrics.registry.metrics()
    expect(metrics).toMatch(/svc_offers_by_state\{state="quarantined"\} 1/)
    expect(metrics).toMatch(/svc_audits_total\{result="failed"\} 9\n/)
    await checkInvariants(m.store, auditAccount, FUNDS)
  })
})
