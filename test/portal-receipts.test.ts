import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { chat, startMarket, type Market } from './helpers/market.js'
import { signIn, type PortalClient } from './helpers/portal.js'
import { signersOf } from './helpers/receipts.js'
import { parseReceiptFile } from '../src/receipts/fetch.js'
import { verifyReceipt } from '../src/receipts/verify.js'
import { depositTo, issueKey, openAccount } from '../src/accounts/operations.js'

/** The portal's receipt download: what a signed-in wallet saves from its usage page. */
describe('portal receipt download', () => {
  let m: Market
  let c: PortalClient
  let key: string
  const user = privateKeyToAccount(generatePrivateKey())

  beforeAll(async () => {
    m = await startMarket({ user: user.address })
    c = await signIn(m.url, user)
    key = (await (await c.call('POST', '/keys', { name: 'receipts' })).json()).api_key
  })
  afterAll(() => m?.close())

  it('saves the signed receipt, without a proof before settlement and with one after, as a file that verifies', async () => {
    const reply = await chat(m.url, key, { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'Hi.' }] })
    expect(reply.status).toBe(200)
    const { receipt_id: id } = (await reply.json()).svc
    const before = await c.call('GET', `/usage/${id}/receipt`)
    expect(before.status).toBe(200)
    expect(before.headers.get('content-disposition')).toBe(`attachment; filename="${id}.json"`)
    expect((await before.json()).proof).toBeNull()

    await m.server.settler.runOnce()
    const file = parseReceiptFile(await (await c.call('GET', `/usage/${id}/receipt`)).json())!
    expect(file.signed.receipt.payer).toBe(user.address)
    expect(file.proof).toMatchObject({ rail: 'local', receipt_id: id })
    const v = await verifyReceipt({ ...file, signers: await signersOf(m.url) })
    expect(v.checks.map((k) => k.ok)).toEqual([true, true, true, null])
  })

  it("refuses another account's request and an unknown one with 404", async () => {
    const { account } = await openAccount(m.store, privateKeyToAccount(generatePrivateKey()).address, Date.now())
    await depositTo(m.store, account.id, 1_000_000n, Date.now())
    await m.store.accounts.approve(account.id, 1_000_000n)
    const { key: otherKey } = await issueKey({ now: Date.now(), store: m.store, accountId: account.id, name: 'other' })
    const other = await chat(m.url, otherKey, { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'Hi.' }] })
    expect(other.status).toBe(200)
    const theirs = other.headers.get('x-request-id')!
    for (const id of [theirs, 'req_01JUNKNOWNUNKNOWNUNKNOWN00']) {
      const res = await c.call('GET', `/usage/${id}/receipt`)
      expect(res.status).toBe(404)
      expect((await res.json()).error).toMatchObject({ code: 'feature_not_supported', param: 'request_id' })
    }
  })
})
