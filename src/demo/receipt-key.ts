import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generatePrivateKey } from 'viem/accounts'

/**
 * The demo's receipt key: a file in its data directory, made on the first run (readable by its owner only) and kept,
 * so that receipts signed before a restart still verify after it.
 */
export function demoReceiptKey(dataDir: string): string {
  const file = join(dataDir, 'receipt.key')
  if (!existsSync(file)) writeFileSync(file, `${generatePrivateKey()}\n`, { mode: 0o600, flag: 'wx' })
  return file
}
