// Where the time of a WAL sync goes under load. A capture is answered only once the WAL that holds it is on disk: the
// event loop hands an fdatasync to a thread of libuv's pool and learns of its end in a later turn. This script runs
// the gateway (SQLite file store, funded keys over --accounts accounts) under a closed loop against the simulated
// upstream, traces the gateway's system calls with perf for --trace seconds in the middle of it, and splits each sync
// into four parts:
//   wake    the event loop waking a pool thread (futex) until that thread enters fdatasync: the thread waiting
//           for a core
//   disk    the fdatasync call itself (the disk, and the thread's own wake when the disk is done)
//   return  fdatasync's end until the thread writes the event loop's eventfd
//   notice  that write until the event loop next returns from epoll: the rest of the turn it was busy with
// Each as p50, p90 and mean in µs, and as a multiple of the disk floor measured in the same run (an fdatasync after a
// 4 KiB overwrite in the store's directory, back to back, nothing else running). Tracing costs each traced call a few
// µs: read the parts against each other, not the throughput.
// Needs perf and the right to trace the gateway (root here). --pool-nice N first finds the threads that sync (a short
// trace) and renices them to N (below 0 needs CAP_SYS_NICE): an experiment, not something the gateway does.
// Usage: npm run bench:sync [-- --mode plain|stream --concurrency 16 --seconds 10 --warmup 3 --trace 2 --accounts 32
//   --pool-nice=-15]
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { benchGateway, BENCH_MODEL, load, MESSAGES, start, startGateway, syncFloor } from '../processes.mjs'
import { benchOptions, usageError } from '../options.mjs'

const o = benchOptions(import.meta.url, {
  mode: { type: 'string', default: 'plain', choices: ['plain', 'stream'] },
  concurrency: { type: 'string', default: '16' },
  seconds: { type: 'string', default: '10' },
  warmup: { type: 'string', default: '3' },
  trace: { type: 'string', default: '2' },
  accounts: { type: 'string', default: '32' },
  tokens: { type: 'string', default: '64' },
  'pool-nice': { type: 'string' },
})
if (Number(o.trace) + 2 > Number(o.seconds))
  usageError(import.meta.url, '--seconds must leave a second either side of --trace')
if (o['pool-nice'] !== undefined && !/^-?\d+$/.test(o['pool-nice']))
  usageError(import.meta.url, `--pool-nice takes a nice value (-20 to 19), not '${o['pool-nice']}'`)
try {
  execFileSync('perf', ['--version'], { stdio: 'ignore' })
} catch {
  console.error("perf is not installed: this script reads the gateway's system calls through perf's tracepoints")
  process.exit(2)
}

const dir = mkdtempSync(join(tmpdir(), 'svc-sync-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
const EVENTS = [
  'sys_enter_futex',
  'sys_enter_fdatasync',
  'sys_exit_fdatasync',
  'sys_enter_write',
  'sys_exit_epoll_pwait',
  'sys_exit_epoll_wait',
]
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** The gateway's system calls of interest over `seconds`, as [thread id, µs, event name, arguments]. */
function trace(pid, seconds) {
  const data = join(dir, 'perf.data')
  const events = EVENTS.flatMap((e) => ['-e', `syscalls:${e}`])
  try {
    execFileSync(
      'perf',
      ['record', '-q', '-m', '1024', '-o', data, ...events, '-p', String(pid), '--', 'sleep', String(seconds)],
      { stdio: 'ignore' },
    )
  } catch {
    console.error('perf could not trace the gateway: run as root, or lower /proc/sys/kernel/perf_event_paranoid')
    process.exit(2)
  }
  const text = execFileSync('perf', ['script', '-i', data, '-F', 'tid,time,event,trace'], {
    maxBuffer: 1 << 30,
    stdio: ['ignore', 'pipe', 'ignore'],
  }).toString()
  return text.split('\n').flatMap((line) => {
    const m = /^\s*(\d+)\s+([\d.]+):\s+syscalls:(\w+):\s*(.*)$/.exec(line)
    return m ? [[Number(m[1]), Number(m[2]) * 1e6, m[3], m[4]]] : []
  })
}

/**
 * Each sync's parts, from the events: the event loop's (thread `pid`) last futex wake before a pool thread's
 * fdatasync, the call's entry and exit, that thread's next write (the eventfd), and the event loop's next return from
 * epoll after it. A sync whose parts fell outside the trace is skipped.
 */
function syncs(events, pid) {
  const epollExits = events
    .filter(([tid, , name]) => tid === pid && name.startsWith('sys_exit_epoll'))
    .map(([, t]) => t)
  const next = (t) => {
    let lo = 0
    let hi = epollExits.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (epollExits[mid] <= t) lo = mid + 1
      else hi = mid
    }
    return epollExits[lo]
  }
  let wake
  const open = new Map()
  const out = []
  for (const [tid, t, name, args] of events) {
    if (tid === pid) {
      // FUTEX_WAKE_PRIVATE: uv_cond_signal handing work to the pool.
      if (name === 'sys_enter_futex' && /op: 0x0*81\b/.test(args)) wake = t
      continue
    }
    if (name === 'sys_enter_fdatasync') open.set(tid, { wake, enter: t })
    else if (name === 'sys_exit_fdatasync' && open.has(tid)) open.get(tid).exit = t
    else if (name === 'sys_enter_write' && open.get(tid)?.exit !== undefined) {
      const s = open.get(tid)
      open.delete(tid)
      const seen = next(t)
      if (s.wake === undefined || seen === undefined) continue
      out.push({
        wake: s.enter - s.wake,
        disk: s.exit - s.enter,
        return: t - s.exit,
        notice: seen - t,
        total: seen - s.wake,
      })
    }
  }
  return out
}

// Before any process of the benchmark runs.
const floor = syncFloor(dir)
const sim = await start(['dist/cli/main.js', 'sim-provider', '--port', '0', '--json', '--reply-tokens', o.tokens])
const { config, key } = await benchGateway('.', dir, sim.info.base_url, { accounts: Number(o.accounts) })
const gw = await startGateway(config)
const pid = gw.child.pid
const body = { model: BENCH_MODEL, messages: MESSAGES, max_tokens: Number(o.tokens), stream: o.mode === 'stream' }
const running = load(`${gw.info.base_url}/v1/chat/completions`, body, {
  concurrency: Number(o.concurrency),
  seconds: Number(o.seconds),
  warmup: Number(o.warmup),
  key,
})
await sleep((Number(o.warmup) + 1) * 1000)
if (o['pool-nice'] !== undefined) {
  const syncers = [
    ...new Set(
      trace(pid, 0.5)
        .filter(([, , name]) => name === 'sys_enter_fdatasync')
        .map(([tid]) => tid),
    ),
  ]
  const alive = new Set(readdirSync(`/proc/${pid}/task`).map(Number))
  try {
    for (const tid of syncers.filter((t) => alive.has(t)))
      execFileSync('renice', ['-n', o['pool-nice'], '-p', String(tid)], { stdio: 'ignore' })
  } catch {
    console.error(`renice to ${o['pool-nice']} was refused: a value below the threads' own needs CAP_SYS_NICE`)
    process.exit(2)
  }
  console.log(`reniced the ${syncers.length} threads that ran fdatasync to ${o['pool-nice']}`)
}
const events = trace(pid, Number(o.trace))
const figures = await running
gw.child.kill()
sim.child.kill()

const parts = syncs(events, pid)
// While requests come one at a time the ledger syncs on the event loop itself: nothing to split.
const inline = events.filter(([tid, , name]) => tid === pid && name === 'sys_enter_fdatasync').length
if (inline > 0)
  console.log(`${inline} syncs ran on the event loop itself (requests one at a time) and are not split below`)
if (parts.length === 0) {
  if (inline === 0) console.error('no sync was traced: is the store a file, and did the load reach the gateway?')
  process.exit(inline > 0 ? 0 : 1)
}
const floorUs = floor.p50_ms * 1000
const stat = (xs) => {
  xs.sort((a, b) => a - b)
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length
  return { p50: xs[Math.floor(xs.length / 2)], p90: xs[Math.floor(xs.length * 0.9)], mean }
}
const rows = ['wake', 'disk', 'return', 'notice', 'total'].map((part) => {
  const s = stat(parts.map((p) => p[part]))
  return {
    part,
    p50_us: Math.round(s.p50),
    p90_us: Math.round(s.p90),
    mean_us: Math.round(s.mean),
    'mean / disk floor': +(s.mean / floorUs).toFixed(2),
  }
})
console.log(
  `${o.mode} at concurrency ${o.concurrency}, ${o.accounts} accounts: ${figures.rps} requests/s over ${o.seconds} s (traced for ${o.trace} s); ` +
    `${parts.length} syncs traced, ${Math.round(parts.length / Number(o.trace))} per second`,
)
console.table(rows)
console.log(
  `disk floor: fdatasync after a 4 KiB overwrite, back to back, nothing else running: p50 ${floor.p50_ms} ms, p99 ${floor.p99_ms} ms`,
)
