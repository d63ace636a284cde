// CPU per request of each thread of the gateway under load — the event loop (which runs the ledger), the checkpointer,
// V8's and libuv's helpers — beside the raw pass-through's whole CPU per request measured in the same run (the
// baseline). Usage: npm run bench:threads [-- --mode plain|stream --concurrency 16 --seconds 8]
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { start, startGateway, benchGateway, load, cpuUs, BENCH_MODEL, MESSAGES } from '../processes.mjs'
import { benchOptions } from '../options.mjs'

const o = benchOptions(import.meta.url, {
  mode: { type: 'string', default: 'plain', choices: ['plain', 'stream'] },
  concurrency: { type: 'string', default: '16' },
  seconds: { type: 'string', default: '8' },
  tokens: { type: 'string', default: '64' },
})
const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim())

/** CPU (user + system, and system alone) of every thread of `pid`, by thread id. */
function threads(pid) {
  const out = new Map()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      out.set(tid, { us: (Number(f[11]) + Number(f[12])) * TICK_US, sys: Number(f[12]) * TICK_US })
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out
}

const dir = mkdtempSync(join(tmpdir(), 'svc-threads-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
const sim = await start(['dist/cli/main.js', 'sim-provider', '--port', '0', '--json', '--reply-tokens', o.tokens])
const { config, key } = await benchGateway('.', dir, sim.info.base_url)
const gw = await startGateway(config)
const raw = await start([new URL('../raw-proxy.mjs', import.meta.url).pathname, sim.info.base_url])
const body = { model: BENCH_MODEL, messages: MESSAGES, max_tokens: Number(o.tokens), stream: o.mode === 'stream' }
const c = Number(o.concurrency)
const seconds = Number(o.seconds)

const rawUrl = `${raw.info.base_url}/v1/chat/completions`
await load(rawUrl, body, { concurrency: c, seconds: 4, warmup: 1 })
const rawBefore = cpuUs(raw.child.pid)
const rawRun = await load(rawUrl, body, { concurrency: c, seconds, warmup: 0 })
const rawPerReq = (cpuUs(raw.child.pid) - rawBefore) / rawRun.requests

const url = `${gw.info.base_url}/v1/chat/completions`
await load(url, body, { concurrency: c, seconds: 4, warmup: 1, key })
const before = threads(gw.child.pid)
const run = await load(url, body, { concurrency: c, seconds, warmup: 0, key })
const after = threads(gw.child.pid)

const rows = []
for (const [tid, a] of after) {
  const b = before.get(tid) ?? { us: 0, sys: 0 }
  const us = (a.us - b.us) / run.requests
  if (us <= 0) continue
  // The event loop is the process's main thread; the others are V8's helpers, libuv's pool (WAL syncs), the
  // checkpointer.
  rows.push({
    thread: tid === String(gw.child.pid) ? 'event loop' : `thread ${tid}`,
    cpu_us_per_req: +us.toFixed(1),
    sys_us_per_req: +((a.sys - b.sys) / run.requests).toFixed(1),
    'of raw proxy': +(us / rawPerReq).toFixed(2),
  })
}
rows.sort((x, y) => y.cpu_us_per_req - x.cpu_us_per_req)
const total = rows.reduce((s, r) => s + r.cpu_us_per_req, 0)
console.log(
  `${o.mode}, concurrency ${c}, ${seconds} s: raw proxy ${rawRun.rps} req/s at ${rawPerReq.toFixed(1)} µs CPU per request; gateway ${run.rps} req/s at ${total.toFixed(1)} µs (${(total / rawPerReq).toFixed(2)}× the raw proxy)`,
)
console.table(rows)
process.exit(0)
