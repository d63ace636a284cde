import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { hashKey, isKeyShaped } from '../../auth/keys.js'
import { approveCap, depositTo, issueKey, openAccount } from '../../accounts/operations.js'
import { portOption } from '../context.js'
import type { Store } from '../../store/store.js'

const DEFAULT_PORT = 8080

/** Where the demo's port came from, so that a start says so when it is not the one the data directory had. */
export interface DemoPort {
  port: number
  /** The port the data directory's config named, when it had one and another was asked for. */
  previous?: number
  source: '--port' | 'PORT' | 'config' | 'default'
}

/** The demo's port: `--port`, else `PORT`, else the one its data directory's config names, else 8080. */
export function demoPort(option: string | undefined, env: NodeJS.ProcessEnv, configFile: string): DemoPort {
  const written = writtenPort(configFile)
  const asked =
    option !== undefined ? portOption('--port', option) : env.PORT ? portOption('PORT', env.PORT) : undefined
  if (asked === undefined)
    return written === undefined ? { port: DEFAULT_PORT, source: 'default' } : { port: written, source: 'config' }
  const source = option !== undefined ? '--port' : 'PORT'
  return { port: asked, source, ...(written !== undefined && written !== asked ? { previous: written } : {}) }
}

function writtenPort(configFile: string): number | undefined {
  if (!existsSync(configFile)) return undefined
  try {
    const port = (JSON.parse(readFileSync(configFile, 'utf8')) as { listen?: { port?: unknown } }).listen?.port
    return typeof port === 'number' ? port : undefined
  } catch {
    return undefined
  }
}

/**
 * The demo wallet's account, funded and approved at its first start only (on the ledger; on chain, `funds` is left
 * out): a restart leaves its balance, its cap and what it spent as they are. Whether this start created it.
 */
export async function demoAccount(store: Store, wallet: string, funds?: { deposit: bigint; cap: bigint }) {
  const { account, created } = await openAccount(store, wallet, Date.now())
  if (created && funds) {
    await depositTo(store, account.id, funds.deposit, Date.now())
    await approveCap(store, account.id, funds.cap)
  }
  return { accountId: account.id, created }
}

/**
 * The demo's key: the one saved in the data directory (readable by its owner only) while it is still live for this
 * account, else a new one, saved there. A restart prints the same key instead of adding another.
 */
export async function demoKey(
  store: Store,
  accountId: number,
  dataDir: string,
): Promise<{ key: string; reused: boolean }> {
  const file = join(dataDir, 'demo-key')
  const saved = existsSync(file) ? readFileSync(file, 'utf8').trim() : ''
  if (isKeyShaped(saved)) {
    const owner = await store.keys.ownerOf(hashKey(saved))
    if (owner && !owner.revoked && owner.accountId === accountId) return { key: saved, reused: true }
  }
  const { key } = await issueKey({ store, accountId, name: 'demo', now: Date.now() })
  writeFileSync(file, `${key}\n`, { mode: 0o600 })
  chmodSync(file, 0o600)
  return { key, reused: false }
}
