// The gateway beside its anchor, in one run over the same simulated upstream: a raw node:http + undici pass-through
// (bench/raw-proxy.mjs), the gateway as one process, and the gateway with --workers N (default: this machine's
// cores, at least 2), each on a fresh SQLite store. Per mode (plain, stream) and concurrency, in --rounds interleaved
// rounds (raw, 1 worker, N workers, raw, …): requests/s, p50 and p99, the CPU each target spent per request (every
// process of it: a primary and its workers), its memory after the load (in all as proportional shares, so that what
// its processes share counts once; and its largest process's RSS) and how busy the whole machine was; then the medians
// of per-round ratios: against the raw proxy, and N workers against one. The load comes from wrk (Debian's package)
// when it is installed, else from bench/loadgen.mjs, whose own CPU then takes more of the machine from the targets.
// Usage: npm run bench:anchors [-- --seconds 5 --warmup 2 --rounds 3 --concurrency 16,64 --modes plain,stream
//   --tokens 16 --workers 2 --loader wrk|node --node-args="--flag …"] (--node-args: node flags for both gateways after
//   their own)
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  benchGateway,
  BENCH_MODEL,
  cpuUs,
  load,
  machineCpuUs,
  median,
  MESSAGES,
  rssMb,
  start,
  startGateway,
} from './processes.mjs'
import { benchOptions, nodeArgsOf } from './options.mjs'
import { hasWrk, wrkLoad } from './wrk.mjs'

const o = benchOptions(import.meta.url, {
  seconds: { type: 'string', default: '5' },
  warmup: { type: 'string', default: '2' },
  rounds: { type: 'string', default: '3' },
  concurrency: { type: 'string', default: '16,64' },
  modes: { type: 'string', default: 'plain,stream', choices: ['plain', 'stream'], list: true },
  tokens: { type: 'string', default: '16' },
  workers: { type: 'string', default: String(Math.max(2, availableParallelism())) },
  loader: { type: 'string', default: hasWrk() ? 'wrk' : 'node', choices: ['wrk', 'node'] },
  'node-args': { type: 'string', default: '' },
})
const tokens = Number(o.tokens)
const dirs = []
process.on('exit', () => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))

/** A process and its descendants (a primary's workers, forked by its main thread), by pid. */
function tree(pid) {
  let children = []
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    // No list of children in this kernel (or the process is gone): the process alone.
  }
  return [pid, ...children.flatMap(tree)]
}
const cpuOf = (pids) => pids.reduce((sum, pid) => sum + cpuUs(pid), 0)
/** A process's proportional share of memory (MB): pages it shares with its workers (node's code) counted once. */
const pssMb = (pid) => Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))[1]) / 1024

const sim = await start(['dist/cli/main.js', 'sim-provider', '--port', '0', '--json', '--reply-tokens', String(tokens)])
const raw = await start(['bench/raw-proxy.mjs', sim.info.base_url])

/** A gateway of `workers` processes over a fresh store of its own, funded; its base URL, pid and key. */
async function gateway(workers) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-anchors-'))
  dirs.push(dir)
  const { config, key } = await benchGateway('.', dir, sim.info.base_url)
  const gw = await startGateway(config, { env: { SVC_WORKERS: String(workers) }, nodeArgs: nodeArgsOf(o) })
  return { url: `${gw.info.base_url}/v1/chat/completions`, pid: gw.child.pid, key, model: BENCH_MODEL }
}
const workers = Number(o.workers)
const targets = [
  { name: 'raw proxy', url: `${raw.info.base_url}/v1/chat/completions`, pid: raw.child.pid, key: '', model: 'bench' },
  { name: 'gateway, 1 worker', ...(await gateway(1)) },
  { name: `gateway, ${workers} workers`, ...(await gateway(workers)) },
]

/** One figure of `t` at `c` connections. */
async function measure(t, stream, c, { seconds, warmup }) {
  const body = { model: t.model, messages: MESSAGES, max_tokens: tokens, stream }
  const pids = tree(t.pid)
  const cpu0 = cpuOf(pids)
  const m0 = machineCpuUs()
  const opts = { concurrency: c, seconds, warmup, key: t.key }
  const r = o.loader === 'wrk' ? await wrkLoad(t.url, body, opts) : await load(t.url, body, opts)
  const m1 = machineCpuUs()
  if (tree(t.pid).join() !== pids.join())
    throw new Error(`${t.name}: its processes changed during the load (one exited)`)
  // CPU over the whole load, warm-up included, per request it served.
  const served = r.requests * (1 + warmup / seconds)
  const rss = pids.map(rssMb)
  return {
    rps: r.rps,
    errors: r.errors,
    p50_ms: r.p50_ms,
    p99_ms: r.p99_ms,
    cpu_us: served ? (cpuOf(pids) - cpu0) / served : null,
    pss_mb: pids.reduce((sum, pid) => sum + pssMb(pid), 0),
    rss_max_mb: Math.max(...rss),
    machine_busy_pct: (100 * (m1.busy - m0.busy)) / (m1.all - m0.all),
  }
}

// A fresh process compiles and fills its caches in its first seconds: each target runs every mode once unmeasured.
for (const mode of o.modes.split(','))
  for (const t of targets) await measure(t, mode === 'stream', 16, { seconds: 3, warmup: 0 })

const runs = []
for (const mode of o.modes.split(','))
  for (const c of o.concurrency.split(',').map(Number))
    for (let round = 1; round <= Number(o.rounds); round++)
      for (const t of targets) {
        const r = await measure(t, mode === 'stream', c, { seconds: Number(o.seconds), warmup: Number(o.warmup) })
        runs.push({ target: t.name, mode, c, round, ...r })
        process.stderr.write(`${mode} c=${c} round ${round} ${t.name}: ${r.rps} req/s, ${Math.round(r.cpu_us)} µs\n`)
      }

const fixed = (x, d) => (x === null ? null : +x.toFixed(d))
const rows = []
const ratios = []
for (const mode of o.modes.split(','))
  for (const c of o.concurrency.split(',').map(Number)) {
    const of = (name) => runs.filter((r) => r.target === name && r.mode === mode && r.c === c)
    for (const t of targets) {
      const g = of(t.name)
      const med = (f) => median(g.map((r) => r[f]))
      rows.push({
        target: t.name,
        mode,
        c,
        'req/s': fixed(med('rps'), 0),
        errors: fixed(med('errors'), 0),
        'p50 ms': fixed(med('p50_ms'), 2),
        'p99 ms': fixed(med('p99_ms'), 2),
        'cpu µs/req': fixed(med('cpu_us'), 0),
        'memory MB': fixed(med('pss_mb'), 0),
        'largest RSS MB': fixed(med('rss_max_mb'), 0),
        'machine busy %': fixed(med('machine_busy_pct'), 0),
      })
    }
    // Ratios round by round (each pair measured minutes apart at most), then their median.
    const ratio = (a, b, f) => {
      const [xs, ys] = [of(a), of(b)]
      return fixed(median(xs.map((x) => x[f] / ys.find((y) => y.round === x.round)[f])), 2)
    }
    const [rawName, one, many] = targets.map((t) => t.name)
    ratios.push({
      mode,
      c,
      'req/s 1 worker / raw': ratio(one, rawName, 'rps'),
      [`req/s ${workers} workers / raw`]: ratio(many, rawName, 'rps'),
      [`req/s ${workers} workers / 1 worker`]: ratio(many, one, 'rps'),
      'cpu/req 1 worker / raw': ratio(one, rawName, 'cpu_us'),
      [`cpu/req ${workers} workers / 1 worker`]: ratio(many, one, 'cpu_us'),
    })
  }
console.log(
  `\nAnchors: ${o.seconds} s per figure after ${o.warmup} s warm-up, ${tokens} tokens per reply, closed loop, load from ${o.loader}, medians of ${o.rounds} interleaved rounds`,
)
console.table(rows)
console.table(ratios)
process.exit(0)
