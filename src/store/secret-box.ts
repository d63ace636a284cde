import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { ConfigError } from '../config.js'
import type { Config } from '../config-schema.js'

export const DEFAULT_SECRETS_KEY_ENV = 'SVC_SECRETS_KEY'

/** How a sealed secret begins in the store: the format's version and the id of the key that sealed it. */
const PREFIX = 'sealed:v1:'
const KEY = /^(0x)?[0-9a-fA-F]{64}$/

/** A secret the store keeps for someone else (a provider's API key) could not be opened: named, never shown. */
export class SecretUnreadable extends Error {}

/**
 * Seals the secrets the store keeps (providers' API keys) with AES-256-GCM, each bound to what it belongs to (the
 * row's id), so that a copy of the database without the key reveals none and a sealed value moved to another row does
 * not open. The first key seals; the others (earlier keys, during a rotation) only open what they sealed.
 */
export class SecretBox {
  private readonly keys: { id: string; key: Buffer }[]

  constructor(keys: Buffer[]) {
    if (keys.length === 0) throw new Error('a secret box needs a key')
    this.keys = keys.map((key) => ({ id: keyId(key), key }))
  }

  /** The id of the key that seals: a hash of it, safe to show. */
  get current(): string {
    return this.keys[0]!.id
  }

  seal(secret: string, boundTo: string): string {
    const { id, key } = this.keys[0]!
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(boundTo))
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()])
    return `${PREFIX}${id}:${iv.toString('base64url')}:${sealed.toString('base64url')}`
  }

  /** The secret `value` holds, sealed or (written before secrets were sealed) as it is. */
  open(value: string, boundTo: string): string {
    if (!isSealed(value)) return value
    const [id, iv, body] = value.slice(PREFIX.length).split(':') as [string, string, string]
    const k = this.keys.find((k) => k.id === id)
    if (!k) throw new SecretUnreadable(`sealed with key ${id}, which the secrets key does not hold`)
    const bytes = Buffer.from(body, 'base64url')
    try {
      const decipher = createDecipheriv('aes-256-gcm', k.key, Buffer.from(iv, 'base64url'))
        .setAAD(Buffer.from(boundTo))
        .setAuthTag(bytes.subarray(bytes.length - 16))
      return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()]).toString('utf8')
    } catch {
      throw new SecretUnreadable(`sealed with key ${id}, but it does not open with it (altered, or moved)`)
    }
  }

  /** Whether `value` is sealed with the key that seals now (else a rotation seals it again). */
  sealedNow(value: string): boolean {
    return value.startsWith(`${PREFIX}${this.current}:`)
  }
}

export function isSealed(value: string): boolean {
  return value.startsWith(PREFIX)
}

function keyId(key: Buffer): string {
  return createHash('sha256').update('svc secrets key\0').update(key).digest('hex').slice(0, 12)
}

/**
 * The secrets key from the file or environment variable the config names (SVC_SECRETS_KEY by default): one key of 64
 * hex digits, or several separated by spaces, commas or lines, the first sealing and the others opening what they
 * sealed (a rotation). Undefined when none is configured. Errors name where it was looked for, never what was found.
 */
export function loadSecretBox(
  config: Pick<Config, 'secrets'>,
  env: NodeJS.ProcessEnv = process.env,
): SecretBox | undefined {
  const c = config.secrets ?? {}
  const envName = c.keyEnv ?? DEFAULT_SECRETS_KEY_ENV
  let text: string | undefined
  let source: string
  if (c.keyFile !== undefined) {
    source = `secrets.keyFile (${c.keyFile})`
    try {
      text = readFileSync(c.keyFile, 'utf8')
    } catch (err) {
      throw new ConfigError([`${source}: cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`], 'config')
    }
  } else {
    source = `environment variable ${envName}`
    text = env[envName]?.trim() || undefined
    if (text === undefined && c.keyEnv !== undefined)
      throw new ConfigError([`${source}: secrets.keyEnv names it, but it is not set`], 'environment')
    if (text === undefined) return undefined
  }
  const keys = text.split(/[\s,]+/).filter(Boolean)
  if (keys.length === 0 || !keys.every((k) => KEY.test(k)))
    throw new ConfigError([`${source}: must hold keys of 64 hex digits, the sealing one first`], 'config')
  return new SecretBox(keys.map((k) => Buffer.from(k.replace(/^0x/, ''), 'hex')))
}

/** A new secrets key, as a key file holds it. */
export function newSecretsKey(): string {
  return randomBytes(32).toString('hex')
}
