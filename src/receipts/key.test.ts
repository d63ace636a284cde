import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { ConfigError } from '../config.js'
import { loadReceiptKey } from './key.js'

const dir = mkdtempSync(join(tmpdir(), 'svc-receipt-key-'))

describe('the receipt key', () => {
  it('is read from the file the config names, or from the environment variable', () => {
    const key = generatePrivateKey()
    const file = join(dir, 'receipt.key')
    writeFileSync(file, `${key}\n`)
    const address = privateKeyToAccount(key).address
    expect(loadReceiptKey({ receipts: { keyFile: file } }, {}).account.address).toBe(address)
    const fromEnv = loadReceiptKey({ receipts: { keyEnv: 'MY_KEY' } }, { MY_KEY: key })
    expect(fromEnv).toMatchObject({ ephemeral: false, source: 'environment variable MY_KEY' })
    expect(fromEnv.account.address).toBe(address)
    expect(loadReceiptKey({}, { SVC_RECEIPT_KEY: key }).account.address).toBe(address)
  })

  it('is made for the process when none is configured, and refused, without being shown, when malformed or missing', () => {
    expect(loadReceiptKey({}, {}).ephemeral).toBe(true)
    const bad = `0x${'ab'.repeat(31)}`
    const err = (() => {
      try {
        loadReceiptKey({}, { SVC_RECEIPT_KEY: bad })
      } catch (e) {
        return e as ConfigError
      }
    })()
    expect(err).toBeInstanceOf(ConfigError)
    expect(err!.message).toMatch(/SVC_RECEIPT_KEY: must be a private key/)
    expect(err!.message).not.toContain(bad)
    expect(() => loadReceiptKey({ receipts: { keyEnv: 'UNSET_KEY' } }, {})).toThrow(/UNSET_KEY.*not set/)
    expect(() => loadReceiptKey({ receipts: { keyFile: join(dir, 'none') } }, {})).toThrow(/cannot be read \(ENOENT\)/)
  })

  it('publishes the current signer from its start and the retired ones with their periods', () => {
    const key = generatePrivateKey()
    const old = privateKeyToAccount(generatePrivateKey()).address
    const k = loadReceiptKey(
      {
        receipts: {
          validFrom: '2026-11-01T00:00:00Z',
          retired: [
            { address: old.toLowerCase(), validFrom: '2026-01-01T00:00:00Z', validUntil: '2026-11-01T00:00:00Z' },
          ],
        },
      },
      { SVC_RECEIPT_KEY: key },
    )
    expect(k.signers).toEqual([
      { address: privateKeyToAccount(key).address, valid_from: '2026-11-01T00:00:00.000Z', valid_until: null },
      { address: old, valid_from: '2026-01-01T00:00:00.000Z', valid_until: '2026-11-01T00:00:00.000Z' },
    ])
  })
})
