import { beforeEach, describe, expect, it } from 'vitest'
import { verifyReceipt } from '../src/receipts/verify.js'
import { chat, marketPerTest, sseEvents } from './helpers/market.js'
import { getWithKey, proofOf, receiptOf, signersOf } from './helpers/receipts.js'
import { STORE_KINDS, postgresReachable } from './helpers/stores.js'

const hello = [{ role: 'user', content: 'Say something.' }]

describe.each(STORE_KINDS)('receipts on the local rail, %s store', (kind) => {
  const market = marketPerTest()
  beforeEach(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) ctx.skip()
  })

  it('gives a streamed request a receipt in its svc chunk, and proves it against the root kept in the store', async () => {
    const m = await market({ store: kind })
    const res = await chat(m.url, m.key, { model: 'svc/atlas@1', messages: hello, stream: true })
    expect(res.status).toBe(200)
    const chunks = (await sseEvents(res)).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d))
    const svc = chunks.find((c) => c.svc)!.svc as { receipt_id: string; request_id: string }
    expect(svc.receipt_id).toBe(`rct_${svc.request_id.slice(4)}`)
    const signed = await receiptOf(m.url, m.key, svc.receipt_id)
    expect(signed.domain).toEqual({ name: 'svc receipts', version: '1' })
    await m.server.settler.runOnce()
    const proof = await proofOf(m.url, m.key, svc.request_id)
    expect(proof).toMatchObject({ rail: 'local', tx_hash: null, chain_id: null, settler: null })
    const [batch] = await m.store.settlement.batches(['settled'])
    expect(proof.root).toBe(batch!.receiptsRoot)
    const verdict = await verifyReceipt({ signed, signers: await signersOf(m.url), proof })
    expect(verdict.checks.map((k) => [k.name, k.ok])).toEqual([
      ['signature', true],
      ['leaf', true],
      ['proof', true],
      ['chain', null],
    ])
    expect(verdict.checks[3]!.detail).toMatch(/^not on a chain/)
    expect(verdict).toMatchObject({ ok: true, complete: false })
  })

  it('publishes its signer without a key, and answers unknown and unchargeable receipts with spec errors', async () => {
    const m = await market({ store: kind })
    const signer = await getWithKey(m.url, undefined, '/v1/receipts/signer')
    expect(signer.status).toBe(200)
    expect(signer.body).toMatchObject({ object: 'receipt.signers', rail: 'local' })
    expect((signer.body.signers as { valid_until: string | null }[])[0]!.valid_until).toBeNull()

    const unknown = await getWithKey(m.url, m.key, '/v1/usage/rct_01JUNKNOWNUNKNOWNUNKNOWN00/proof')
    expect(unknown.status).toBe(404)
    expect(unknown.body.error).toMatchObject({ code: 'feature_not_supported', param: 'request_id' })
    const noKey = await getWithKey(m.url, undefined, '/v1/usage/rct_01JUNKNOWNUNKNOWNUNKNOWN00/proof')
    expect(noKey.status).toBe(401)

    // A request the upstream failed is recorded and receipted, charged nothing, so no batch commits to it.
    m.sims.atlasCheap.setFault({ kind: 'status-500' })
    m.sims.atlasDear.setFault({ kind: 'status-500' })
    const failed = await chat(m.url, m.key, { model: 'svc/atlas@1', messages: hello })
    expect(failed.status).toBe(503)
    const id = failed.headers.get('x-request-id')!
    const signed = await receiptOf(m.url, m.key, id)
    expect(signed.receipt).toMatchObject({ cost: '0', outcome: 'no_capacity', provider: null })
    const none = await getWithKey(m.url, m.key, `/v1/usage/${id}/proof`)
    expect(none.status).toBe(404)
    expect((none.body.error as { message: string }).message).toMatch(/Nothing was charged/)
    const verdict = await verifyReceipt({ signed, signers: await signersOf(m.url) })
    expect(verdict.checks[0]).toMatchObject({ name: 'signature', ok: true })
  })
})
