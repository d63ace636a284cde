import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { toHex, type Hex } from 'viem'
import { mnemonicToAccount, type HDAccount } from 'viem/accounts'

/** Anvil's default dev accounts come from this public mnemonic; none of them holds anything of value. */
export const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk'
export const ANVIL_CHAIN_ID = 31337

export function anvilAccount(index: number): HDAccount {
  return mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: index })
}

export function anvilKey(index: number): Hex {
  return toHex(anvilAccount(index).getHdKey().privateKey!)
}

/**
 * The anvil binary shipped by the @foundry-rs/anvil npm package (its platform package), or SVC_ANVIL_BIN;
 * null when neither is installed. The binary is started directly so stopping it stops the node itself.
 */
export function anvilBinary(env: NodeJS.ProcessEnv = process.env): string | null {
  if (env.SVC_ANVIL_BIN) return existsSync(env.SVC_ANVIL_BIN) ? env.SVC_ANVIL_BIN : null
  const arch = process.arch === 'x64' ? 'amd64' : process.arch
  const name = process.platform === 'win32' ? 'anvil.exe' : 'anvil'
  try {
    const path = createRequire(import.meta.url).resolve(`@foundry-rs/anvil-${process.platform}-${arch}/bin/${name}`)
    return existsSync(path) ? path : null
  } catch {
    return null
  }
}

export interface Anvil {
  rpcUrl: string
  port: number
  chainId: number
  close(): Promise<void>
}

export interface AnvilOptions {
  /** Seconds between blocks (interval mining); absent: a block per transaction (automine). */
  blockTime?: number
  binary?: string
}

/** Starts a local anvil on a free port and resolves once it listens. */
export async function startAnvil(opts: AnvilOptions = {}): Promise<Anvil> {
  const binary = opts.binary ?? anvilBinary()
  if (!binary) throw new Error('anvil is not installed: npm install @foundry-rs/anvil (or set SVC_ANVIL_BIN)')
  const args = ['--host', '127.0.0.1', '--port', '0', '--chain-id', String(ANVIL_CHAIN_ID)]
  if (opts.blockTime !== undefined) args.push('--block-time', String(opts.blockTime))
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  // Never outlives this process: whatever ends it (an exit before `close`, a failed start), the chain goes with it.
  const killOnExit = () => child.kill('SIGTERM')
  process.once('exit', killOnExit)
  child.once('exit', () => process.off('exit', killOnExit))
  const port = await listeningPort(child).catch((err) => {
    child.kill('SIGTERM')
    throw err
  })
  return {
    rpcUrl: `http://127.0.0.1:${port}`,
    port,
    chainId: ANVIL_CHAIN_ID,
    close: () => stop(child),
  }
}

function listeningPort(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    let seen = ''
    const onData = (chunk: Buffer) => {
      seen += chunk.toString()
      const m = /Listening on [\d.]+:(\d+)/.exec(seen)
      if (!m) return
      child.stdout!.off('data', onData)
      // Keep draining: anvil logs every request, and a full pipe would stall it.
      child.stdout!.resume()
      resolve(Number(m[1]))
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', (c: Buffer) => (seen += c.toString()))
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`anvil exited (${code}) before listening: ${seen.slice(-500)}`)))
  })
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}
