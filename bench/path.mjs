// The gateway's request path, two builds in one process: this checkout and a git ref, each a whole gateway (its Fastify
// app, key check, admission, routing, the OpenAI-compatible adapter over undici, settlement, a SQLite file store whose
// captures wait for the WAL's sync) started in the same process, driven in turn through Fastify's inject (no client
// sockets, no load-generator process) against one simulated upstream, also in that process. Duels of separate processes
// on this VM resolve about ±8 %: each slice there shares two cores with a load generator and an upstream, and the
// processes' own luck differs. Here the event loop's CPU per request (the main thread's, from /proc: the WAL syncs on
// libuv's pool varied more than the code) is read around each slice and the builds alternate slice by slice, so what
// the machine does falls on both alike. The figure is the whole path's CPU, the upstream's and inject's share included
// (the same for both builds): the ratio understates a change's size, and the difference in µs is the change itself. A
// build against itself came out within about ±2 %. The build started first in a process ran 5–10 % cheaper in runs of a
// build against itself (code shared by the two, Fastify's, undici's and node's, meets the first one's objects first).
// So the slices are spread over --processes processes (default 4), half of them starting each build first. Usage: npm
// run bench:path -- --base <git ref> [--mode plain|stream --concurrency 16 --slices 16 --slice 2 --processes 4]
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { benchGateway, BENCH_MODEL, buildBase, cpuUs, gatewayNodeFlags, median, MESSAGES } from './processes.mjs'
import { benchOptions, usageError } from './options.mjs'

const o = benchOptions(import.meta.url, {
  base: { type: 'string' },
  mode: { type: 'string', default: 'plain', choices: ['plain', 'stream'] },
  concurrency: { type: 'string', default: '16' },
  slices: { type: 'string', default: '16' },
  slice: { type: 'string', default: '2' },
  tokens: { type: 'string', default: '64' },
  warmup: { type: 'string', default: '3' },
  processes: { type: 'string', default: '4' },
  // Internal: a child process measuring the builds in `root` (the base's work tree) and '.', `first` started first.
  child: { type: 'string' },
  first: { type: 'string' },
})
if (!o.base) usageError(import.meta.url, '--base <git ref> is required: the build to measure this checkout against')

if (o.child) {
  console.log(JSON.stringify(await measure(o.child, o.first === 'this')))
  process.exit(0)
}

const base = buildBase(o.base)
const processes = Number(o.processes)
const perProcess = Math.ceil(Number(o.slices) / processes)
const names = [`base ${o.base}`, 'this checkout']
const slices = [[], []]
for (let p = 0; p < processes; p++) {
  const args = [
    process.argv[1],
    ...process.argv.slice(2),
    '--child',
    base,
    '--first',
    p % 2 ? 'this' : 'base',
    '--slices',
    String(perProcess),
  ]
  // Both builds share the process, and so its node flags: this checkout's gateway's.
  const got = JSON.parse(
    execFileSync(process.execPath, [...(await gatewayNodeFlags()), ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
    }).toString(),
  )
  got.forEach((s, i) => slices[i].push(...s))
}
const cpuRatios = slices[1].map((s, i) => s.cpu / slices[0][i].cpu)
const cpuDiffs = slices[1].map((s, i) => s.cpu - slices[0][i].cpu)
console.log(
  `\nThe request path in one process: ${o.mode}, ${o.concurrency} in flight, ${slices[0].length} slices of ${o.slice} s per build over ${processes} processes, alternating`,
)
console.table(
  names.map((name, i) => ({
    build: name,
    'req/s': Math.round(median(slices[i].map((s) => s.rps))),
    'CPU µs/req': +median(slices[i].map((s) => s.cpu)).toFixed(1),
    'CPU µs/req min–max': `${Math.min(...slices[i].map((s) => s.cpu)).toFixed(1)}–${Math.max(...slices[i].map((s) => s.cpu)).toFixed(1)}`,
  })),
)
console.log(
  `CPU per request this/base: ${median(cpuRatios).toFixed(3)} (median of per-slice ratios; ${cpuRatios.filter((r) => r < 1).length} of ${cpuRatios.length} slices cheaper), difference ${median(cpuDiffs).toFixed(1)} µs (median)`,
)

/** The child's work: both builds in this process, alternating slices. Returns the slices of [base, this]. */
async function measure(baseRoot, thisFirst) {
  const dirs = []
  process.on('exit', () => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))
  const { SimulatedProvider } = await import(resolve('dist/providers/simulated/server.js'))
  const sim = await SimulatedProvider.start({ replyTokens: Number(o.tokens) })
  /** A gateway of the build in `root`, started in this process over a fresh store, and its funded key. */
  const gateway = async (root) => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-path-'))
    dirs.push(dir)
    const { config, key } = await benchGateway(root, dir, sim.url)
    const { loadConfig } = await import(resolve(root, 'dist/config.js'))
    const { startServer } = await import(resolve(root, 'dist/server.js'))
    const server = await startServer(loadConfig(config, {}), { log: () => {} })
    return { server, key, slices: [] }
  }
  const builds = [null, null]
  for (const i of thisFirst ? [1, 0] : [0, 1]) builds[i] = await gateway(i === 1 ? '.' : baseRoot)
  // Each request's own, as the load generator's (bench/loadgen.mjs).
  const [payloadHead, payloadTail] = JSON.stringify({
    model: BENCH_MODEL,
    messages: MESSAGES,
    max_tokens: Number(o.tokens),
    stream: o.mode === 'stream',
  }).split('{{n}}')
  let sent = 0
  const concurrency = Number(o.concurrency)

  /** A closed loop of `concurrency` requests in flight for `seconds`: requests/s and CPU µs per request. */
  const slice = async (build, seconds) => {
    const headers = { authorization: `Bearer ${build.key}`, 'content-type': 'application/json' }
    const end = performance.now() + seconds * 1000
    let served = 0
    let failed = 0
    const cpu = cpuUs(process.pid, true)
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          const res = await build.server.app.inject({
            method: 'POST',
            url: '/v1/chat/completions',
            headers,
            payload: payloadHead + sent++ + payloadTail,
          })
          if (res.statusCode === 200) served++
          else failed++
        }
      }),
    )
    const used = cpuUs(process.pid, true) - cpu
    if (failed > 0) throw new Error(`${failed} requests failed`)
    return { rps: served / seconds, cpu: used / served }
  }

  for (const b of builds) await slice(b, Number(o.warmup))
  const n = Number(o.slices)
  for (let i = 0; i < n; i++) {
    for (const b of i % 2 ? [builds[1], builds[0]] : builds) b.slices.push(await slice(b, Number(o.slice)))
  }
  for (const b of builds) await b.server.close()
  await sim.close()
  return builds.map((b) => b.slices)
}
