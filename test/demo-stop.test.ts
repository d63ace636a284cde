import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { CLI, cleanEnv } from './helpers/cli.js'
import { hasAnvil } from './helpers/chain.js'

/** The process's parent and state from /proc, or undefined once it is gone. */
function procStat(pid: number): { ppid: number; state: string; name: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const close = stat.lastIndexOf(')')
    const [state, ppid] = stat.slice(close + 2).split(' ')
    return { ppid: Number(ppid), state: state!, name: stat.slice(stat.indexOf('(') + 1, close) }
  } catch {
    return undefined
  }
}

function childrenOf(pid: number, name: string): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((p) => {
      const s = procStat(p)
      return s?.ppid === pid && s.name.includes(name)
    })
}

const alive = (pid: number) => {
  const s = procStat(pid)
  return s !== undefined && s.state !== 'Z'
}

describe.skipIf(!hasAnvil)('svc demo --rail anvil stopped while it starts', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('stops the anvil it started (%s)', async (signal) => {
    const data = mkdtempSync(join(tmpdir(), 'svc-demo-stop-'))
    const demo = spawn(
      process.execPath,
      [CLI, 'demo', '--rail', 'anvil', '--port', '0', '--data', data, '--chunk-delay-ms', '0'],
      { env: cleanEnv(), stdio: 'ignore' },
    )
    const exited = once(demo, 'exit')
    let anvils: number[] = []
    await expect.poll(() => (anvils = childrenOf(demo.pid!, 'anvil')).length, { timeout: 20_000, interval: 20 }).toBe(1)
    // Its own signal, as a supervisor sends it (a terminal's Ctrl-C would reach the whole process group).
    demo.kill(signal)
    const [code] = await exited
    expect(code).toBe(signal === 'SIGINT' ? 130 : 143)
    await expect.poll(() => alive(anvils[0]!), { timeout: 5_000 }).toBe(false)
  })
})
