import { hash, randomBytes, randomInt } from 'node:crypto'

export const KEY_PREFIX = 'svc_test_'
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const KEY_LENGTH = 40
const SHOWN_PREFIX = KEY_PREFIX.length + 6

export interface NewKey {
  id: string
  /** The secret: shown once, never stored. */
  key: string
  hash: string
  /** What lists show: `svc_test_AbC123…`. */
  prefix: string
}

function base62(length: number): string {
  let out = ''
  for (let i = 0; i < length; i++) out += ALPHABET[randomInt(ALPHABET.length)]
  return out
}

const KEY_SHAPE = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${KEY_LENGTH}}$`)

/**
 * Whether `key` could be one of ours (the prefix and 40 base62 characters): anything else is unknown without a lookup.
 */
export function isKeyShaped(key: string): boolean {
  return key.length === KEY_PREFIX.length + KEY_LENGTH && KEY_SHAPE.test(key)
}

/** SHA-256 is enough for high-entropy keys (≈ 238 bits); no salt or slow hash needed. */
export function hashKey(key: string): string {
  return hash('sha256', key, 'hex')
}

export function generateKey(): NewKey {
  const key = KEY_PREFIX + base62(KEY_LENGTH)
  return {
    id: `key_${randomBytes(8).toString('hex')}`,
    key,
    hash: hashKey(key),
    prefix: `${key.slice(0, SHOWN_PREFIX)}…`,
  }
}
