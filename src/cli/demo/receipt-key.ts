import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generatePrivateKey } from 'viem/accounts'
import { newSecretsKey } from '../../store/secret-box.js'

/** A key file of the demo's data directory, made on its first run (readable by its owner only) and kept. */
function keptKey(dataDir: string, name: string, make: () => string): string {
  const file = join(dataDir, name)
  if (!existsSync(file)) writeFileSync(file, `${make()}\n`, { mode: 0o600, flag: 'wx' })
  return file
}

/** The demo's receipt key: kept, so that receipts signed before a restart still verify after it. */
export function demoReceiptKey(dataDir: string): string {
  return keptKey(dataDir, 'receipt.key', generatePrivateKey)
}

/** The demo's secrets key, which seals providers' API keys in its store: kept, so that they open after a restart. */
export function demoSecretsKey(dataDir: string): string {
  return keptKey(dataDir, 'secrets.key', newSecretsKey)
}
