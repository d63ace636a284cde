import { describe, expect, it } from 'vitest'
import { getAddress } from 'viem'
import { checksumAddress, hasValidChecksum, isEvmAddress } from './address.js'

describe('EIP-55 addresses', () => {
  it('checksums like viem', () => {
    for (const a of [
      '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266',
      '0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed',
      '0x' + 'ab'.repeat(20),
    ]) {
      expect(checksumAddress(a)).toBe(getAddress(a))
    }
  })
  it('recognises addresses and bad checksums', () => {
    expect(isEvmAddress('0x123')).toBe(false)
    expect(isEvmAddress('0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266')).toBe(true)
    expect(hasValidChecksum('0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266')).toBe(true)
    expect(hasValidChecksum('0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266')).toBe(false)
  })
})
