import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Command } from 'commander'
import type { Config } from '../config-schema.js'
import type { Store } from '../store/store.js'
import { countFrom } from '../protocol/counts.js'

/** An expected failure of a command: one line on stderr, exit code 1. */
export class CliError extends Error {}

export const DEFAULT_DATA_DIR = './data'
export const DEFAULT_CONFIG = `${DEFAULT_DATA_DIR}/config.json`

export interface CommonOptions {
  config?: string
  json?: boolean
}

/** Every command accepts --config and --json (docs/architecture.md §9). */
export function common(cmd: Command): Command {
  return cmd
    .option('--config <file>', `config file (default: $SVC_CONFIG, else ${DEFAULT_CONFIG} as written by svc demo)`)
    .option('--json', 'print one JSON object on stdout instead of text')
}

/**
 * For the commands that read no config (`demo` writes its own, `certify` probes an upstream): `--config` is accepted,
 * as by every command (docs/architecture.md §9), and said to be unused.
 */
export function noConfig(cmd: Command): Command {
  return cmd
    .option('--config <file>', "accepted like every command's; unused here")
    .option('--json', 'print one JSON object on stdout instead of text')
}

export function configPath(opts: CommonOptions): string {
  const path = opts.config ?? process.env.SVC_CONFIG ?? DEFAULT_CONFIG
  if (!opts.config && !process.env.SVC_CONFIG && !existsSync(path)) {
    throw new CliError(
      `no config: pass --config <file>, set SVC_CONFIG, or run svc demo once to write ${DEFAULT_CONFIG}`,
    )
  }
  return path
}

/** Heavy modules load only when a command runs, so `svc --help` and small commands start fast. */
export async function readConfig(opts: CommonOptions): Promise<Config> {
  const { loadConfig } = await import('../config.js')
  return loadConfig(configPath(opts))
}

/** Opens the config's store for one command and closes it afterwards. */
/**
 * Runs `fn` on the config's store. A SQLite file must exist unless `create` (the commands that begin a store: `account
 * create`, `deposit`, `chain status` before the first serve): a mistyped path would otherwise be a new, empty store,
 * and its accounts would look lost.
 */
export async function withStore<T>(
  opts: CommonOptions,
  fn: (store: Store, config: Config) => Promise<T>,
  { create = false } = {},
): Promise<T> {
  const config = await readConfig(opts)
  const path = config.store.startsWith('sqlite:') ? config.store.slice('sqlite:'.length) : ''
  if (!create && path !== '' && path !== ':memory:' && !existsSync(path)) {
    throw new CliError(
      `no store at ${resolve(path)} (the config's store, or DATABASE_URL): check the path; svc serve, svc demo or svc account create make a new one`,
    )
  }
  const { openStore } = await import('../store/open.js')
  const { loadSecretBox } = await import('../store/secret-box.js')
  const secrets = loadSecretBox(config)
  const store = await openStore(config.store)
  store.providers.keys.use(secrets)
  try {
    return await fn(store, config)
  } finally {
    await store.close()
  }
}

/** Prints the result: one JSON object with --json, else the text lines. bigint becomes a string. */
export function emit(opts: CommonOptions, json: Record<string, unknown>, text: string | string[]): void {
  if (opts.json)
    process.stdout.write(`${JSON.stringify(json, (_k, v) => (typeof v === 'bigint' ? v.toString() : v))}\n`)
  else process.stdout.write(`${Array.isArray(text) ? text.join('\n') : text}\n`)
}

/** Runs a command action, turning expected failures into one clear line and exit code 1. */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args)
    } catch (err) {
      const { ConfigError } = await import('../config.js')
      const { OperationError } = await import('../accounts/operations.js')
      if (err instanceof ConfigError || err instanceof OperationError || err instanceof CliError) {
        process.stderr.write(`error: ${err.message}\n`)
        process.exit(1)
      }
      const known = environmentFailure(err)
      if (known) {
        process.stderr.write(`error: ${known}\n`)
        process.exit(1)
      }
      throw err
    }
  }
}

export function onShutdown(close: () => Promise<void>): void {
  let closing = false
  const stop = () => {
    if (closing) return
    closing = true
    close().then(
      () => process.exit(0),
      (err) => {
        process.stderr.write(`error while stopping: ${(err as Error).message}\n`)
        process.exit(1)
      },
    )
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

/** A port option: 0 (a free one) to 65535, in plain digits; otherwise one line naming the option. */
export function portOption(name: string, text: string): number {
  const port = countFrom(text, 65535, 0)
  if (port === null) throw new CliError(`${name} must be a port number, got ${text}`)
  return port
}

/** A whole-number option from 0 to `max`, in plain digits; otherwise one line naming the option. */
export function wholeOption(name: string, text: string, max: number): number {
  const n = countFrom(text, max, 0)
  if (n === null) throw new CliError(`${name} must be a whole number from 0 to ${max}, got ${text}`)
  return n
}

/** System error codes an operator fixes outside the program: a port taken, a server that does not answer. */
const ENVIRONMENT_CODES: Record<string, string> = {
  EADDRINUSE: 'the address is in use (another process listens on that port)',
  EACCES: 'permission denied',
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENOENT: 'no such file or directory',
  ENOTDIR: 'not a directory',
  EEXIST: 'a file is in the way',
  EROFS: 'read-only file system',
  EADDRNOTAVAIL: "the address is not one of this machine's",
  SQLITE_NOTADB: 'the store file is not a SQLite database',
  SQLITE_CANTOPEN: 'the store file cannot be opened',
  SVC_STORE_NEWER: 'the store was written by a newer svc',
}

/**
 * The one line for a failure of the machine or the network rather than of the program (a stack trace helps no one
 * there): its code's meaning and its own message. Postgres's refusals (a missing database, a bad password) too.
 */
function environmentFailure(err: unknown): string | null {
  const e = (err ?? {}) as { code?: string; message?: string; severity?: string; errors?: { message?: string }[] }
  if (typeof e.code !== 'string') return null
  const what = ENVIRONMENT_CODES[e.code]
  // Node reports a refused connection to a name with several addresses as an AggregateError without a message.
  const message = e.message || e.errors?.map((x) => x.message).join('; ') || e.code
  if (what) return `${what}: ${message}`
  // Refused at the door (a bad password, a missing database or role), or for want of a privilege: the operator's to
  // fix. Any other database error is a bug, and keeps its stack.
  if (e.severity === 'FATAL' || e.code.startsWith('28') || e.code === '3D000' || e.code === '42501')
    return `the database refused: ${message}`
  return null
}
