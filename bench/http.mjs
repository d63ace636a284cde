// Gateway overhead against a raw pass-through, measured in one run (DESIGN §10, issue 7).
// Targets: (a) the simulated upstream directly, (b) a raw node:http + undici proxy, (c) the gateway with its full
// path (key check, admission hold, metering, capture, usage record, durable SQLite ledger). Ratios are gateway/(b).
// Usage: npm run bench [-- --seconds 5 --warmup 2 --concurrency 16,64 --modes plain,stream --soak 60 --profile]
import { spawn, execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

const { values: o } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' }, warmup: { type: 'string', default: '2' }, concurrency: { type: 'string', default: '16,64' },
    modes: { type: 'string', default: 'plain,stream' }, tokens: { type: 'string', default: '64' }, soak: { type: 'string', default: '0' },
    profile: { type: 'boolean', default: false }, targets: { type: 'string', default: 'upstream,raw-proxy,gateway' },
  },
})
const CLI = 'dist/cli/main.js'
const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim())
const children = []
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')))

/** Starts a process and resolves with its first stdout line parsed as JSON. */
function start(args, nodeArgs = []) {
  const child = spawn(process.execPath, [...nodeArgs, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, DATABASE_URL: '', PORT: '' } })
  children.push(child)
  return new Promise((resolve, reject) => {
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (d) => {
      out += d
      const nl = out.indexOf('\n')
      if (nl >= 0) resolve({ child, info: JSON.parse(out.slice(0, nl)) })
    })
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)))
  })
}

function cpuUs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(f[11]) + Number(f[12])) * TICK_US
}
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024

function load(url, body, concurrency, seconds, warmup, key) {
  const args = ['bench/loadgen.mjs', url, JSON.stringify(body), String(concurrency), String(seconds), String(warmup), ...(key ? [key] : [])]
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (d) => (out += d))
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`loadgen exited ${code}`))))
  })
}

async function measure(name, pid, url, body, c, stream, key) {
  const warmup = Number(o.warmup)
  const seconds = Number(o.seconds)
  // CPU is read around the whole load (warm-up included) and divided by all requests it served.
  const before = pid ? cpuUs(pid) : 0
  const r = await load(url, { ...body, stream }, c, seconds, warmup, key)
  const cpu = pid ? (cpuUs(pid) - before) / (r.requests * (1 + warmup / seconds)) : null
  return { target: name, mode: stream ? 'stream' : 'plain', concurrency: c, ...r, cpu_us_per_req: cpu && Math.round(cpu) }
}

const tokens = Number(o.tokens)
const sim = await start([CLI, 'sim-provider', '--port', '0', '--json', '--reply-tokens', String(tokens)])
const raw = await start(['bench/raw-proxy.mjs', sim.info.base_url])
const dir = mkdtempSync(join(tmpdir(), 'svc-bench-'))
const config = join(dir, 'config.json')
writeFileSync(config, JSON.stringify({
  listen: { host: '127.0.0.1', port: 0 }, store: `sqlite:${join(dir, 'svc.db')}`, rail: { kind: 'local' }, feeBps: 500,
  models: [{ id: 'svc/bench@1', owned_by: 'bench', contextLimit: 32768, capabilities: { workload: 'chat', tools: false, structuredOutputs: false, reasoning: false, streaming: true, maxOutputTokens: 4096 } }],
  providers: [{ address: '0x00000000000000000000000000000000000000be', baseUrl: sim.info.base_url, bundle: 'bench', profile: 'sim', offers: [{ model: 'svc/bench@1', upstreamModel: 'bench', input_price_per_mtok: '150000', output_price_per_mtok: '600000', maxConcurrency: 4096 }] }],
  tuning: { settleIntervalMs: 0 },
}))
const wallet = '0x00000000000000000000000000000000000000b0'
const cli = (...args) => JSON.parse(execFileSync(process.execPath, [CLI, ...args, '--config', config, '--json'], { env: { ...process.env, DATABASE_URL: '' } }).toString())
cli('deposit', '--wallet', wallet, '--amount', '1000000')
cli('approve', '--wallet', wallet, '--amount', '1000000')
const key = cli('key', 'create', '--wallet', wallet).api_key
const profileDir = join('bench', 'results', 'profiles')
if (o.profile) mkdirSync(profileDir, { recursive: true })
const gw = await start([CLI, 'serve', '--config', config, '--json'], o.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [])

const messages = [{ role: 'user', content: 'Tell me something about the river and the harbor.' }]
const rows = []
for (const mode of o.modes.split(',')) {
  for (const c of o.concurrency.split(',').map(Number)) {
    const stream = mode === 'stream'
    const want = o.targets.split(',')
    if (want.includes('upstream')) rows.push(await measure('upstream', null, `${sim.info.base_url}/chat/completions`, { model: 'bench', messages, max_tokens: tokens }, c, stream))
    if (want.includes('raw-proxy')) rows.push(await measure('raw-proxy', raw.child.pid, `${raw.info.base_url}/v1/chat/completions`, { model: 'bench', messages, max_tokens: tokens }, c, stream))
    if (want.includes('gateway')) rows.push(await measure('gateway', gw.child.pid, `${gw.info.base_url}/v1/chat/completions`, { model: 'svc/bench@1', messages, max_tokens: tokens }, c, stream, key))
  }
}

let soak = null
if (Number(o.soak) > 0) {
  const samples = []
  const timer = setInterval(() => samples.push(+rssMb(gw.child.pid).toFixed(1)), 1000)
  const r = await load(`${gw.info.base_url}/v1/chat/completions`, { model: 'svc/bench@1', messages, max_tokens: tokens }, 64, Number(o.soak), 5, key)
  clearInterval(timer)
  const tenth = Math.max(1, Math.floor(samples.length / 10))
  const early = samples.slice(0, tenth).reduce((a, b) => a + b, 0) / tenth
  const late = samples.slice(-tenth).reduce((a, b) => a + b, 0) / tenth
  soak = { seconds: Number(o.soak), requests: r.requests, rps: r.rps, rss_mb_first_tenth: +early.toFixed(1), rss_mb_last_tenth: +late.toFixed(1), growth: +(late / early - 1).toFixed(3), samples }
}

const ratios = []
for (const r of rows.filter((x) => x.target === 'gateway')) {
  const base = rows.find((x) => x.target === 'raw-proxy' && x.mode === r.mode && x.concurrency === r.concurrency)
  if (!base) continue
  ratios.push({
    mode: r.mode, concurrency: r.concurrency,
    'rps gateway/raw': +(r.rps / base.rps).toFixed(3),
    'added p50 ms': +(r.p50_ms - base.p50_ms).toFixed(3),
    'added p99 ms': +(r.p99_ms - base.p99_ms).toFixed(3),
    'added ttfb p50 ms': +(r.ttfb_p50_ms - base.ttfb_p50_ms).toFixed(3),
    'cpu µs/req gateway': r.cpu_us_per_req, 'cpu µs/req raw': base.cpu_us_per_req,
  })
}
console.log(`\nHTTP benchmark: ${o.seconds} s per figure after ${o.warmup} s warm-up, ${tokens} tokens per reply, closed loop`)
console.table(rows.map(({ requests, ...r }) => r))
console.table(ratios)
if (soak) console.log(`soak at c=64 for ${soak.seconds} s: ${soak.rps} req/s, RSS ${soak.rss_mb_first_tenth} → ${soak.rss_mb_last_tenth} MB (${(soak.growth * 100).toFixed(1)}%)`)
gw.child.kill('SIGTERM')
await new Promise((r) => gw.child.once('exit', r))
const usage = cli('usage', '--wallet', wallet, '--limit', '1')
const out = join('bench', 'results', `http-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), options: o, rows, ratios, soak, last_usage: usage.data[0] ?? null }, null, 2))
console.log(`written ${out}`)
process.exit(0)
