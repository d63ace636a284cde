// Two builds of the gateway side by side — this checkout and a git ref — loaded in turn in short slices, so that the
// machine's drift (tens of percent from one minute to the next on this VM) falls on both alike. Rounds of whole
// benchmarks one after the other could not tell a 5 % change from the drift; paired slices can. Each slice: one gateway
// gets a closed loop of --concurrency connections for --slice seconds (after 0.5 s of warm-up); the order alternates.
// Each build runs as --processes fresh processes in turn (see below). Printed: medians per build, the median of the
// per-slice ratios this/base, and in how many slices this checkout was faster. Usage: npm run bench:duel -- --base <git
// ref> [--mode plain|stream --concurrency 16 --slices 16 --slice 2 --processes 4] [--node-args="--flag …"] (node flags
// for this checkout's gateways only: a duel of runtime flags against --base HEAD) [--env="NAME=value …"] (environment
// added to this checkout's gateways only, as --node-args) [--config='{"metrics":false}'] (config fields given to this
// checkout's gateways only) [--key-limits='{"rpm":1000000,"limit":"1000000","limit_reset":"daily"}'] (this checkout's
// keys limited, with `svc key create`'s options: rpm, tpm, limit, limit_reset; to duel limits against none)
// [--accounts 32] (each gateway's requests spread over that many funded accounts, in turn)
// [--audit-interval 600000] (both builds get a dearer reference offer of the model, which takes no traffic; this
// checkout audits the served offer against it that often: what audits cost)
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  benchGateway,
  BENCH_MODEL,
  buildBase,
  cpuUs,
  load,
  median,
  MESSAGES,
  start,
  startGateway,
} from './processes.mjs'
import { benchOptions, nodeArgsOf, usageError } from './options.mjs'

const o = benchOptions(import.meta.url, {
  base: { type: 'string' },
  mode: { type: 'string', default: 'plain', choices: ['plain', 'stream'] },
  concurrency: { type: 'string', default: '16' },
  slices: { type: 'string', default: '16' },
  slice: { type: 'string', default: '2' },
  tokens: { type: 'string', default: '64' },
  processes: { type: 'string', default: '4' },
  'node-args': { type: 'string', default: '' },
  env: { type: 'string', default: '' },
  config: { type: 'string', default: '{}' },
  'key-limits': { type: 'string' },
  accounts: { type: 'string', default: '1' },
  'audit-interval': { type: 'string' },
})
if (!o.base) usageError(import.meta.url, '--base <git ref> is required: the build to measure this checkout against')

const base = buildBase(o.base)
const stores = []
process.on('exit', () => stores.forEach((dir) => rmSync(dir, { recursive: true, force: true })))
const sim = await start(['dist/cli/main.js', 'sim-provider', '--port', '0', '--json', '--reply-tokens', o.tokens])
/** A fresh gateway process of the build in `root`, over a fresh store. */
async function gateway(root, { nodeArgs = [], env = {}, config: extra = {}, limits, audits } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-duel-'))
  stores.push(dir)
  const accounts = Number(o.accounts)
  const options = { accounts, config: extra, limits, audits }
  const { config, key } = await benchGateway(root, dir, sim.info.base_url, options)
  const gw = await startGateway(config, { root, nodeArgs, env })
  return { child: gw.child, key, pid: gw.child.pid, url: `${gw.info.base_url}/v1/chat/completions` }
}
const thisArgs = nodeArgsOf(o)
const thisEnv = Object.fromEntries(
  o.env
    .split(' ')
    .filter(Boolean)
    .map((kv) => {
      const eq = kv.indexOf('=')
      if (eq <= 0) usageError(import.meta.url, `--env takes NAME=value pairs, not "${kv}"`)
      return [kv.slice(0, eq), kv.slice(eq + 1)]
    }),
)
const thisConfig = JSON.parse(o.config)
const thisExtras = [
  ...(thisArgs.length ? [`node ${thisArgs.join(' ')} after its own flags`] : []),
  ...(o.env ? [`env ${o.env}`] : []),
  ...(o.config !== '{}' ? [`config ${o.config}`] : []),
  ...(o['key-limits'] ? [`key limits ${o['key-limits']}`] : []),
  ...(o['audit-interval'] ? [`audits every ${o['audit-interval']} ms`] : []),
]
const audited = o['audit-interval'] === undefined ? undefined : Number(o['audit-interval'])
const builds = [
  { name: `base ${o.base}`, root: base, slices: [], ...(audited !== undefined ? { audits: true } : {}) },
  {
    name: `this checkout${thisExtras.length ? ` (${thisExtras.join('; ')})` : ''}`,
    root: '.',
    nodeArgs: thisArgs,
    env: thisEnv,
    config: thisConfig,
    ...(o['key-limits'] ? { limits: JSON.parse(o['key-limits']) } : {}),
    ...(audited !== undefined ? { audits: { intervalMs: audited } } : {}),
    slices: [],
  },
]
const body = { model: BENCH_MODEL, messages: MESSAGES, max_tokens: Number(o.tokens), stream: o.mode === 'stream' }
const c = Number(o.concurrency)
const seconds = Number(o.slice)
const processes = Number(o.processes)
const perProcess = Math.ceil(Number(o.slices) / processes)
// A process has luck of its own (where its memory and threads land, what the JIT decides) that pairing slices does
// not cancel: two processes of the same build differed by up to 7 % over 16 slices. Each build is started afresh
// --processes times, in alternating order, and the slices are spread over those processes.
for (let p = 0; p < processes; p++) {
  const order = p % 2 ? [builds[1], builds[0]] : builds
  const live = new Map()
  for (const b of order) live.set(b, await gateway(b.root, b))
  for (const b of order)
    await load(live.get(b).url, body, { concurrency: c, seconds: 3, warmup: 0, key: live.get(b).key })
  for (let i = 0; i < perProcess; i++) {
    for (const b of i % 2 ? [builds[1], builds[0]] : builds) {
      const g = live.get(b)
      const cpu = cpuUs(g.pid)
      const loop = cpuUs(g.pid, true)
      const r = await load(g.url, body, { concurrency: c, seconds, warmup: 0.5, key: g.key })
      const served = r.requests * (1 + 0.5 / seconds)
      b.slices.push({
        rps: r.rps,
        p50: r.p50_ms,
        p99: r.p99_ms,
        cpu: (cpuUs(g.pid) - cpu) / served,
        loop: (cpuUs(g.pid, true) - loop) / served,
      })
    }
  }
  // Stopped as an operator would (SIGTERM; nothing is in flight), so that a --node-args profile (--cpu-prof) is
  // written.
  for (const g of live.values()) {
    const exited = new Promise((resolve) => g.child.once('exit', resolve))
    g.child.kill('SIGTERM')
    const late = setTimeout(() => g.child.kill('SIGKILL'), 15_000)
    await exited
    clearTimeout(late)
  }
}
console.log(
  `\nDuel: ${o.mode}, concurrency ${c}, ${builds[0].slices.length} slices of ${seconds} s per build over ${processes} processes each, alternating`,
)
console.table(
  builds.map((b) => ({
    build: b.name,
    'req/s': Math.round(median(b.slices.map((s) => s.rps))),
    'p50 ms': +median(b.slices.map((s) => s.p50)).toFixed(2),
    'p99 ms': +median(b.slices.map((s) => s.p99)).toFixed(2),
    'CPU µs/req': Math.round(median(b.slices.map((s) => s.cpu))),
    'event-loop CPU µs/req': Math.round(median(b.slices.map((s) => s.loop))),
  })),
)
const [a, b] = builds
const ratio = median(b.slices.map((s, i) => s.rps / a.slices[i].rps))
const wins = b.slices.filter((s, i) => s.rps > a.slices[i].rps).length
console.log(
  `req/s this/base: ${ratio.toFixed(3)} (median of per-slice ratios); this checkout faster in ${wins} of ${b.slices.length} slices`,
)
process.exit(0)
