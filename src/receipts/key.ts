import { readFileSync } from 'node:fs'
import { getAddress, type Hex } from 'viem'
import { generatePrivateKey, privateKeyToAccount, type LocalAccount } from 'viem/accounts'
import { ConfigError } from '../config.js'
import type { Config } from '../config-schema.js'

export const DEFAULT_RECEIPT_KEY_ENV = 'SVC_RECEIPT_KEY'

/** A published receipt signer: its address and when it signed; `valid_until` null for the current one. */
export interface PublishedSigner {
  address: string
  valid_from: string
  valid_until: string | null
}

/** The key receipts are signed with, where it came from (never the key itself), and every signer to publish. */
export interface ReceiptKey {
  account: LocalAccount
  source: string
  /** True when no key was configured: one was made for this process, and its receipts verify only while it runs. */
  ephemeral: boolean
  signers: PublishedSigner[]
}

const KEY = /^0x[0-9a-fA-F]{64}$/

/**
 * Loads the receipt key from the file or environment variable the config names (SVC_RECEIPT_KEY by default); without
 * either, a key made for this process. The key is never logged: errors name where it was looked for, not what was
 * found.
 */
export function loadReceiptKey(
  config: Pick<Config, 'receipts'>,
  env: NodeJS.ProcessEnv = process.env,
  now: () => number = Date.now,
): ReceiptKey {
  const c = config.receipts ?? {}
  const envName = c.keyEnv ?? DEFAULT_RECEIPT_KEY_ENV
  let key: string | undefined
  let source: string
  if (c.keyFile !== undefined) {
    source = `receipts.keyFile (${c.keyFile})`
    try {
      key = readFileSync(c.keyFile, 'utf8').trim()
    } catch (err) {
      throw new ConfigError([`${source}: cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`], 'config')
    }
  } else {
    source = `environment variable ${envName}`
    key = env[envName]?.trim() || undefined
    if (key === undefined && c.keyEnv !== undefined)
      throw new ConfigError([`${source}: receipts.keyEnv names it, but it is not set`], 'environment')
  }
  if (key !== undefined && !KEY.test(key))
    throw new ConfigError([`${source}: must be a private key, 0x followed by 64 hex digits`], 'config')
  const ephemeral = key === undefined
  const account = privateKeyToAccount((key ?? generatePrivateKey()) as Hex)
  const retired = (c.retired ?? []).map((r) => ({
    address: getAddress(r.address),
    valid_from: iso(r.validFrom, 'receipts.retired[].validFrom'),
    valid_until: iso(r.validUntil, 'receipts.retired[].validUntil'),
  }))
  const current: PublishedSigner = {
    address: account.address,
    valid_from: c.validFrom ? iso(c.validFrom, 'receipts.validFrom') : new Date(now()).toISOString(),
    valid_until: null,
  }
  return {
    account,
    source: ephemeral ? 'a key made for this process' : source,
    ephemeral,
    signers: [current, ...retired],
  }
}

function iso(text: string, field: string): string {
  const t = Date.parse(text)
  if (Number.isNaN(t)) throw new ConfigError([`${field}: ${text} is not a date-time`], 'config')
  return new Date(t).toISOString()
}
