import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, type StoreFixture } from '../../test/helpers/store-fixture.js'
import type { AuditRepo, AuditRow } from './audits.js'

describe.each(STORE_KINDS)('audits on %s', (kind) => {
  let f: StoreFixture | undefined
  let audits: AuditRepo

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    audits = f.store.audits
  })
  afterAll(() => closeFixture(f))

  const audit = (id: string, result: AuditRow['result'], at: number, provider = '0xA1'): AuditRow => ({
    id,
    model: 'svc/m@1',
    provider,
    offerSignature: 'sig',
    promptId: 'p',
    result,
    reason: result === 'failed' ? 'tokens' : null,
    requestId: `req_${id}`,
    evidence: { divergedAt: 2 },
    createdAt: at,
  })

  it("keeps audits, reads an offer's conclusive ones newest first, and counts them by result", async () => {
    await audits.record(audit('aud_1', 'passed', 100))
    await audits.record(audit('aud_2', 'inconclusive', 200))
    await audits.record(audit('aud_3', 'failed', 300))
    await audits.record(audit('aud_4', 'passed', 400, '0xB1'))
    const recent = await audits.conclusive('0xA1', 'svc/m@1', 0, 10)
    expect(recent.map((a) => [a.id, a.result])).toEqual([
      ['aud_3', 'failed'],
      ['aud_1', 'passed'],
    ])
    expect(recent[0]!.evidence).toEqual({ divergedAt: 2 })
    expect((await audits.conclusive('0xA1', 'svc/m@1', 150, 10)).map((a) => a.id)).toEqual(['aud_3'])
    expect(await audits.counts('0xA1', 'svc/m@1', 0)).toEqual({ passed: 1, failed: 1, inconclusive: 1 })
    expect((await audits.list({ result: 'passed', limit: 10 })).map((a) => a.id)).toEqual(['aud_4', 'aud_1'])
    expect((await audits.get('aud_2'))?.requestId).toBe('req_aud_2')
    expect(await audits.get('aud_none')).toBeUndefined()
  })

  it("records a reference's answer once per prompt and bound, replaced when another reference answers", async () => {
    expect(await audits.reference('svc/m@1', 'p', 24)).toBeUndefined()
    const answer = { text: 'Paris', finish: 'stop' }
    const ref = { provider: '0xD1', offerSignature: 'sig', requestId: 'req_r', answer, recordedAt: 5 }
    await audits.recordReference('svc/m@1', 'p', 24, ref)
    expect(await audits.reference('svc/m@1', 'p', 24)).toEqual({
      provider: '0xD1',
      offerSignature: 'sig',
      requestId: 'req_r',
      answer,
      recordedAt: 5,
    })
    expect(await audits.reference('svc/m@1', 'p', 16)).toBeUndefined()
    await audits.recordReference('svc/m@1', 'p', 24, { ...ref, provider: '0xD2', requestId: null, recordedAt: 6 })
    expect((await audits.reference('svc/m@1', 'p', 24))?.provider).toBe('0xD2')
  })

  it("writes each offer's state over its last one", async () => {
    const state = { provider: '0xA1', model: 'svc/m@1', offerSignature: 's', passed: 1, failed: 0, since: 10 }
    await audits.setState({ ...state, state: 'unverified', lastAuditAt: 10 })
    await audits.setState({ ...state, state: 'suspect', failed: 1, lastAuditAt: 20, since: 20 })
    expect(await audits.states()).toEqual([{ ...state, state: 'suspect', failed: 1, lastAuditAt: 20, since: 20 }])
  })
})
