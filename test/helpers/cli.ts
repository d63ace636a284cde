import { spawn, execFile, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { resolve } from 'node:path'
import { promisify } from 'node:util'

export const CLI = resolve('dist/cli/main.js')
const run = promisify(execFile)

/**
 * A clean environment: no store or port overrides leak in from the shell (a test's own `extra` stand), and `svc serve`
 * runs one process unless a test asks for workers (`--workers`, or SVC_WORKERS in `extra`).
 */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env.DATABASE_URL
  delete env.PORT
  delete env.SVC_CONFIG
  return { ...env, SVC_WORKERS: '1', ...extra }
}

/** Runs one svc command to completion. */
export async function svc(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: cleanEnv(env), timeout: 30_000 })
    return { stdout, stderr, code: 0 }
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; code?: number }
    return { stdout: e.stdout ?? '', stderr: e.stderr ?? '', code: typeof e.code === 'number' ? e.code : 1 }
  }
}

export interface Daemon {
  child: ChildProcess
  /** Everything printed on stdout so far. */
  output(): string
  stop(signal?: NodeJS.Signals): Promise<void>
}

/** Starts a long-running svc command and resolves once its stdout contains `ready`. */
export async function daemon(args: string[], ready: RegExp, env: Record<string, string> = {}): Promise<Daemon> {
  const child = spawn(process.execPath, [CLI, ...args], { env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d))
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d))
  await new Promise<void>((resolveReady, reject) => {
    const timer = setTimeout(() => reject(new Error(`svc ${args.join(' ')} not ready: ${out}${err}`)), 30_000)
    const check = () => {
      if (ready.test(out)) {
        clearTimeout(timer)
        resolveReady()
      }
    }
    child.stdout!.on('data', check)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`svc ${args.join(' ')} exited ${code}: ${out}${err}`))
    })
  })
  child.removeAllListeners('exit')
  return {
    child,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill(signal)
      await once(child, 'exit')
    },
  }
}

/** What `svc serve` says once it listens: the fields of its `listening` log line. */
export const LISTENING = /"msg":"listening"/

export function listeningLine(output: string): { base_url: string; portal_url: string; metrics_url: string | null } {
  const line = output.split('\n').find((l) => LISTENING.test(l))
  if (!line) throw new Error(`svc serve said no listening line: ${output}`)
  return JSON.parse(line)
}
