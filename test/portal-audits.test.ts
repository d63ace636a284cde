import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { verifyTypedData, type Hex, type TypedDataDomain } from 'viem'
import { AUDIT_RECORD_TYPES, auditRecordMessage, type WireAudit } from '../src/receipts/audit-record.js'
import { addressOf, startMarket, type Market } from './helpers/market.js'
import { signIn, type PortalClient } from './helpers/portal.js'
import { auditedAtlas, cheating, fundAuditor } from './helpers/audits.js'

const AUDITOR = addressOf(0x5e)

/**
 * A provider reads in the portal why its offer is suspect or quarantined, and each failed audit's record signed as
 * receipts are, which it can check against the gateway's published signers.
 */
describe("a provider's audits in the portal", () => {
  let m: Market
  let p: PortalClient
  const wallet = privateKeyToAccount(generatePrivateKey())
  beforeAll(async () => {
    m = await startMarket({
      edit: (c) => {
        // The cheap atlas provider is a wallet this test signs in with; the dear one is the reference.
        c.providers[0]!.address = wallet.address
        auditedAtlas(c, AUDITOR)
      },
    })
    await fundAuditor(m, AUDITOR, 1_000_000n)
    p = await signIn(m.url, wallet)
  })
  afterAll(() => m?.close())

  const offer = () => m.server.gateway.catalog.offers.get('svc/atlas@1')!.find((o) => o.provider === wallet.address)!
  const page = async () => {
    const res = await p.call('GET', '/provider')
    expect(res.status).toBe(200)
    return (await res.json()) as { offers: { model: string; verification: Record<string, unknown> }[] }
  }

  it('shows an offer verified, then quarantined with the finding of its audit and what is held', async () => {
    for (let i = 0; i < 3; i++) await m.server.gateway.auditor!.audit(offer())
    expect((await page()).offers[0]!.verification).toMatchObject({
      state: 'verified',
      audits_1d: { passed: 3, failed: 0 },
      last_failed: null,
      held_usdc: null,
    })
    await cheating(m, { kind: 'substitute' }, async () => {
      for (let i = 0; i < 3; i++) await m.server.gateway.auditor!.audit(offer())
    })
    const v = (await page()).offers[0]!.verification
    expect(v).toMatchObject({ state: 'quarantined', audits_1d: { passed: 3, failed: 3 } })
    expect(v.last_failed).toMatchObject({
      reason: 'tokens',
      finding: expect.stringMatching(/^left the reference at token \d+: expected ".+", got ".+"$/),
    })
    expect(Number(v.held_usdc)).toBeGreaterThan(0)
  })

  it('lists its audits newest first, each failed one signed by the receipt key', async () => {
    const res = await p.call('GET', '/provider/audits?limit=10')
    expect(res.status).toBe(200)
    const { data } = (await res.json()) as {
      data: {
        result: string
        finding: string | null
        signed?: { record: WireAudit; domain: TypedDataDomain; signer: string; signature: Hex }
      }[]
    }
    expect(data.map((a) => a.result)).toEqual(['failed', 'failed', 'failed', 'passed', 'passed', 'passed'])
    expect(data.filter((a) => a.signed)).toHaveLength(3)
    const { record, domain, signer, signature } = data[0]!.signed!
    const published = (await (await fetch(`${m.url}/v1/receipts/signer`)).json()) as { address: string }
    expect(signer).toBe(published.address)
    const verify = (r: WireAudit) =>
      verifyTypedData({
        address: signer as Hex,
        domain,
        types: AUDIT_RECORD_TYPES,
        primaryType: 'AuditRecord',
        message: auditRecordMessage(r),
        signature,
      })
    expect(await verify(record)).toBe(true)
    // The evidence is signed through its hash: a changed figure no longer verifies.
    expect(await verify({ ...record, evidence: record.evidence.replace(/"divergedAt":\d+/, '"divergedAt":99') })).toBe(
      false,
    )
    expect(JSON.parse(record.evidence)).toMatchObject({ result: 'failed', reason: 'tokens' })
  })
})
