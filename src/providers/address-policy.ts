import { BlockList, isIP, type LookupFunction } from 'node:net'
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'

import { ADDRESS_CLASSES, type AddressClass } from '../config-schema.js'

export { ADDRESS_CLASSES, type AddressClass } from '../config-schema.js'

/** What addresses an endpoint registered by a wallet may be reached at: public ones, and the classes allowed. */
export interface AddressPolicy {
  allow: readonly AddressClass[]
}

/** Public addresses only: the default for endpoints that wallets register. */
export const PUBLIC_ONLY: AddressPolicy = { allow: [] }

type Range = [string, number, 'ipv4' | 'ipv6']

/** Ranges by class (IANA's special-purpose registries); `reserved` is never allowed. */
const RANGES: Record<AddressClass | 'reserved', Range[]> = {
  loopback: [
    ['127.0.0.0', 8, 'ipv4'],
    ['::1', 128, 'ipv6'],
  ],
  private: [
    ['10.0.0.0', 8, 'ipv4'],
    ['172.16.0.0', 12, 'ipv4'],
    ['192.168.0.0', 16, 'ipv4'],
    // Carrier-grade NAT: the operator's network, not the internet.
    ['100.64.0.0', 10, 'ipv4'],
    ['fc00::', 7, 'ipv6'],
  ],
  'link-local': [
    // Cloud metadata services (169.254.169.254) live here.
    ['169.254.0.0', 16, 'ipv4'],
    ['fe80::', 10, 'ipv6'],
  ],
  reserved: [
    ['0.0.0.0', 8, 'ipv4'],
    ['192.0.0.0', 24, 'ipv4'],
    ['192.0.2.0', 24, 'ipv4'],
    ['198.18.0.0', 15, 'ipv4'],
    ['198.51.100.0', 24, 'ipv4'],
    ['203.0.113.0', 24, 'ipv4'],
    ['224.0.0.0', 4, 'ipv4'],
    ['240.0.0.0', 4, 'ipv4'],
    ['::', 128, 'ipv6'],
    ['64:ff9b::', 96, 'ipv6'],
    ['100::', 64, 'ipv6'],
    ['2001:db8::', 32, 'ipv6'],
    ['ff00::', 8, 'ipv6'],
  ],
}

const LISTS = Object.fromEntries(
  Object.entries(RANGES).map(([name, ranges]) => {
    const list = new BlockList()
    for (const [net, prefix, type] of ranges) list.addSubnet(net, prefix, type)
    return [name, list]
  }),
) as Record<AddressClass | 'reserved', BlockList>

/** The class of an IP address, or `public`. An IPv4 address mapped into IPv6 is classed as the IPv4 one. */
export function classOf(ip: string): AddressClass | 'reserved' | 'public' {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)
  const address = mapped ? mapped[1]! : ip
  const type = isIP(address) === 6 ? 'ipv6' : 'ipv4'
  for (const name of [...ADDRESS_CLASSES, 'reserved'] as const) if (LISTS[name].check(address, type)) return name
  return 'public'
}

/** Why `ip` may not be connected to under `policy`, or null when it may. */
export function addressRefusal(ip: string, policy: AddressPolicy): string | null {
  const kind = classOf(ip)
  if (kind === 'public' || (kind !== 'reserved' && policy.allow.includes(kind))) return null
  const what = kind === 'reserved' ? 'a reserved' : `a ${kind}`
  return `${ip} is ${what} address, which this marketplace does not call for providers' endpoints`
}

/** An address refused by the policy, as a connection's error: it fails the attempt like any unreachable address. */
export class AddressRefused extends Error {
  readonly code = 'SVC_ADDRESS_REFUSED'
}

/**
 * A DNS lookup for connections that keeps only the addresses `policy` allows, so that a name resolving to a private
 * address (at registration or later) is refused on the address actually connected to. An IP literal is checked by the
 * caller: Node connects to one without a lookup.
 */
export function guardedLookup(policy: AddressPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0)
      const allowed = addresses.filter((a) => addressRefusal(a.address, policy) === null)
      if (allowed.length === 0) {
        const why = addressRefusal(addresses[0]?.address ?? hostname, policy) ?? 'no address'
        return callback(new AddressRefused(`${hostname}: ${why}`), '', 0)
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, allowed)
      callback(null, allowed[0]!.address, allowed[0]!.family)
    })
  }
}

/** Why the host of `url` (an IP literal) may not be called, or null; a name is checked at each connection instead. */
export function literalRefusal(url: URL, policy: AddressPolicy): string | null {
  const host = url.hostname.replace(/^\[|\]$/g, '')
  return isIP(host) ? addressRefusal(host, policy) : null
}
