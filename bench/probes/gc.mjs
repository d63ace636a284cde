// The garbage collector's work per request in the gateway, beside the raw pass-through's measured in the same run (the
// baseline): each runs under V8's --trace-gc-nvp (both with the gateway's node flags, so that their young generations
// are sized alike) through the same closed loop, in interleaved rounds. Printed per target (medians of the rounds):
// KB allocated per request, requests per scavenge, KB surviving and KB promoted per scavenge, the scavenges' pause
// (p50 and largest), the collector's pause per request (every kind), and the part of a scavenge spent sweeping array
// buffers (one per socket read or Buffer outside node's pool); then gateway/raw. A scavenge stops every request in
// flight: its pause, and how often it comes, are what the collector adds to p99 under load.
// Usage: npm run bench:gc [-- --mode plain|stream --concurrency 16 --seconds 6 --rounds 2 --node-args="--flag …"]
//   (--node-args: node flags for both targets after the gateway's own)
import { spawn } from 'node:child_process'
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  benchGateway,
  BENCH_MODEL,
  childEnv,
  gatewayNodeFlags,
  killOnExit,
  load,
  median,
  MESSAGES,
  start,
} from '../processes.mjs'
import { benchOptions, nodeArgsOf } from '../options.mjs'

const o = benchOptions(import.meta.url, {
  mode: { type: 'string', default: 'plain', choices: ['plain', 'stream'] },
  concurrency: { type: 'string', default: '16' },
  seconds: { type: 'string', default: '6' },
  rounds: { type: 'string', default: '2' },
  tokens: { type: 'string', default: '64' },
  'node-args': { type: 'string', default: '' },
})
const dir = mkdtempSync(join(tmpdir(), 'svc-gc-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
const flags = [...(await gatewayNodeFlags('.')), ...nodeArgsOf(o), '--trace-gc-nvp']

/**
 * Starts `node flags args` with stdout to a file (V8's trace goes there too), and resolves with the file and its base
 * URL.
 */
async function traced(name, args) {
  const out = join(dir, `${name}.out`)
  const child = killOnExit(
    spawn(process.execPath, [...flags, ...args], { stdio: ['ignore', openSync(out, 'w'), 'inherit'], env: childEnv() }),
  )
  const exited = new Promise((_, reject) => child.once('exit', (code) => reject(new Error(`${name} exited ${code}`))))
  for (let waited = 0; waited < 30_000; waited += 100) {
    const m = /"base_url":"([^"]+)"/.exec(readFileSync(out, 'utf8'))
    if (m) return { out, url: m[1] }
    await Promise.race([new Promise((r) => setTimeout(r, 100)), exited])
  }
  throw new Error(`${name} did not start within 30 s`)
}

const sim = await start(['dist/cli/main.js', 'sim-provider', '--port', '0', '--json', '--reply-tokens', o.tokens])
const { config, key } = await benchGateway('.', dir, sim.info.base_url)
const raw = await traced('raw-proxy', ['bench/raw-proxy.mjs', sim.info.base_url])
const gw = await traced('gateway', ['dist/cli/main.js', 'serve', '--config', config, '--json'])
const targets = [
  { name: 'raw-proxy', ...raw, url: `${raw.url}/v1/chat/completions`, model: 'bench', rounds: [] },
  { name: 'gateway', ...gw, url: `${gw.url}/v1/chat/completions`, model: BENCH_MODEL, key, rounds: [] },
]

const field = (line, name) => Number(new RegExp(`\\b${name.replace('.', '\\.')}=([\\d.]+)`).exec(line)?.[1] ?? 0)
const body = (t) => ({ model: t.model, messages: MESSAGES, max_tokens: Number(o.tokens), stream: o.mode === 'stream' })

/** The collector's work over one closed loop of `t`, from the lines its trace gained meanwhile. */
async function round(t) {
  const mark = readFileSync(t.out, 'utf8').length
  const r = await load(t.url, body(t), {
    concurrency: Number(o.concurrency),
    seconds: Number(o.seconds),
    warmup: 0,
    key: t.key,
  })
  const lines = readFileSync(t.out, 'utf8')
    .slice(mark)
    .split('\n')
    .filter((l) => / gc=\S/.test(l))
  const scavenges = lines.filter((l) => / gc=s\b/.test(l))
  const per = (xs, name) => (xs.length ? xs.reduce((a, l) => a + field(l, name), 0) / xs.length : 0)
  const pauses = scavenges.map((l) => field(l, 'pause'))
  return {
    rps: r.rps,
    alloc_kb_per_req: lines.reduce((a, l) => a + field(l, 'allocated'), 0) / 1024 / r.requests,
    reqs_per_scavenge: scavenges.length ? r.requests / scavenges.length : Infinity,
    survived_kb: per(scavenges, 'new_space_survived') / 1024,
    promoted_kb: per(scavenges, 'promoted') / 1024,
    pause_ms_p50: pauses.length ? median(pauses) : 0,
    pause_ms_max: pauses.length ? Math.max(...pauses) : 0,
    gc_us_per_req: (1000 * lines.reduce((a, l) => a + field(l, 'pause'), 0)) / r.requests,
    sweep_ab_ms: per(scavenges, 'scavenge.sweep_array_buffers'),
  }
}

// Warm-up: each target through the mode once before any figure is taken.
for (const t of targets) await load(t.url, body(t), { concurrency: 16, seconds: 3, warmup: 0, key: t.key })
for (let i = 0; i < Number(o.rounds); i++)
  for (const t of i % 2 ? [...targets].reverse() : targets) t.rounds.push(await round(t))

const METRICS = Object.keys(targets[0].rounds[0])
const rows = targets.map((t) => ({
  target: t.name,
  ...Object.fromEntries(METRICS.map((m) => [m, +median(t.rounds.map((r) => r[m])).toFixed(2)])),
}))
console.log(
  `\nGarbage collector, ${o.mode} at concurrency ${o.concurrency}: medians of ${o.rounds} interleaved rounds of ${o.seconds} s; node ${flags.join(' ')}`,
)
console.table(rows)
console.table([
  { 'gateway/raw': 'ratio', ...Object.fromEntries(METRICS.map((m) => [m, +(rows[1][m] / rows[0][m]).toFixed(2)])) },
])
process.exit(0)
