import { describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { ReceiptBook } from './book.js'
import type { PublishedSigner, ReceiptKey } from './key.js'
import { receiptDomain, type WireReceipt } from './typed-data.js'
import { verifyReceipt } from './verify.js'
import type { ReceiptsRepo } from '../store/receipts.js'

const RETIRED_AT = Date.parse('2026-11-01T00:00:00Z')

const receipt = (createdAt: number): WireReceipt => ({
  object: 'usage.receipt',
  receipt_id: 'rct_01JD0000000000000000000000',
  request_id: 'req_01JD0000000000000000000000',
  key_id: 'key_1',
  payer: privateKeyToAccount(generatePrivateKey()).address,
  model: 'svc/atlas@1',
  served_model: 'svc/atlas@1',
  provider: '0xa1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1',
  body_sha256: 'ab'.repeat(32),
  prompt_tokens: 10,
  completion_tokens: 20,
  upstream_prompt_tokens: null,
  upstream_completion_tokens: 20,
  input_price_per_mtok: '150000',
  output_price_per_mtok: '600000',
  cost: '14',
  fee: '1',
  outcome: 'completed',
  created_at: createdAt,
})

/** A book that only signs (signing needs no store). */
const signerBook = (key: ReceiptKey) =>
  new ReceiptBook(undefined as unknown as ReceiptsRepo, key, receiptDomain(), 'local')

describe('receipt signers across a rotation', () => {
  const oldKey = privateKeyToAccount(generatePrivateKey())
  const newKey = privateKeyToAccount(generatePrivateKey())
  const signers: PublishedSigner[] = [
    { address: newKey.address, valid_from: new Date(RETIRED_AT).toISOString(), valid_until: null },
    {
      address: oldKey.address,
      valid_from: '2026-01-01T00:00:00.000Z',
      valid_until: new Date(RETIRED_AT).toISOString(),
    },
  ]
  const book = (account: typeof oldKey) => signerBook({ account, source: 'test', ephemeral: false, signers })

  it('keeps a receipt the retired key signed while it was valid verifiable, and the new key signs too', async () => {
    const before = receipt(RETIRED_AT - 1)
    for (const account of [oldKey, newKey]) {
      const v = await verifyReceipt({ signed: await book(account).sign(before), signers })
      expect(v.checks[0]).toMatchObject({ name: 'signature', ok: true })
      expect(v.checks[0]!.detail).toContain(account.address)
    }
  })

  it('refuses a receipt the retired key signed for a time after it was retired, and one no published key signed', async () => {
    const after = await book(oldKey).sign(receipt(RETIRED_AT))
    const v = await verifyReceipt({ signed: after, signers })
    expect(v.ok).toBe(false)
    expect(v.checks[0]!.detail).toMatch(/retired at 2026-11-01T00:00:00.000Z, before the receipt's time/)
    const stranger = privateKeyToAccount(generatePrivateKey())
    const forged = await book(stranger).sign(receipt(RETIRED_AT))
    expect((await verifyReceipt({ signed: forged, signers })).checks[0]!.detail).toMatch(
      new RegExp(`recovers ${stranger.address}, which is not a published receipt signer`),
    )
  })
})
