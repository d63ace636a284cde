import { keccak_256 } from '@noble/hashes/sha3'
import { bytesToHex } from '@noble/hashes/utils'

/** EVM addresses without loading viem (half a second of startup for every CLI command). */
const HEX_ADDRESS = /^0x[0-9a-fA-F]{40}$/

export function isEvmAddress(text: string): boolean {
  return HEX_ADDRESS.test(text)
}

/** EIP-55 checksummed form of an address. */
export function checksumAddress(address: string): string {
  const lower = address.slice(2).toLowerCase()
  const hash = bytesToHex(keccak_256(new TextEncoder().encode(lower)))
  let out = '0x'
  for (let i = 0; i < 40; i++) out += parseInt(hash[i]!, 16) >= 8 ? lower[i]!.toUpperCase() : lower[i]!
  return out
}

/** True when the address is all one case, or mixed case with a valid checksum. */
export function hasValidChecksum(address: string): boolean {
  const body = address.slice(2)
  if (body === body.toLowerCase() || body === body.toUpperCase()) return true
  return checksumAddress(address) === address
}
