// The gateway's memory under a long mixed load: plain and streamed requests at once (half the connections each),
// spread over several funded keys and several models, its RSS read from /proc each second. The baseline is its RSS
// after the first minute (heap and caches warm); the figure is the RSS at the end as a ratio of it, and of each
// later minute, so that growth shows as ratios above 1 (the bound: within 1.2 after 10 minutes).
// Also printed: the same for the simulated upstream beside it, which keeps nothing per request, as a control.
// Usage: npm run bench:memory [-- --minutes 10 --concurrency 64 --accounts 8 --models 3 --modes plain,stream --heap
//   --node-args="--flag …"] (--heap: the gateway also writes a heap snapshot after the first minute and at the end, to
//   bench/results/heap/; --node-args: node flags for the gateway after its own)
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { benchGateway, BENCH_MODEL, load, MESSAGES, rssMb, start, startGateway } from './processes.mjs'
import { benchOptions, nodeArgsOf } from './options.mjs'

const o = benchOptions(import.meta.url, {
  minutes: { type: 'string', default: '10' },
  concurrency: { type: 'string', default: '64' },
  accounts: { type: 'string', default: '8' },
  models: { type: 'string', default: '3' },
  modes: { type: 'string', default: 'plain,stream', choices: ['plain', 'stream'], list: true },
  heap: { type: 'boolean', default: false },
  'node-args': { type: 'string', default: '' },
})
const modes = o.modes.split(',')
const CLI = 'dist/cli/main.js'

const sim = await start([CLI, 'sim-provider', '--port', '0', '--json', '--reply-tokens', '64'])
const dir = mkdtempSync(join(tmpdir(), 'svc-memory-'))
// Several models, each its own offer of the one upstream: per-model metrics, offer stats and breakers all in play.
const models = Array.from({ length: Number(o.models) }, (_, i) => (i === 0 ? BENCH_MODEL : `svc/bench-${i}@1`))
const model = (id) => ({
  id,
  owned_by: 'bench',
  contextLimit: 32768,
  capabilities: {
    workload: 'chat',
    tools: false,
    structuredOutputs: false,
    reasoning: false,
    streaming: true,
    maxOutputTokens: 4096,
  },
})
const offer = (id, i) => ({
  model: id,
  upstreamModel: `bench-${i}`,
  input_price_per_mtok: '150000',
  output_price_per_mtok: '600000',
  maxConcurrency: 4096,
})
const config = {
  models: models.map(model),
  providers: [
    {
      address: '0x00000000000000000000000000000000000000be',
      baseUrl: sim.info.base_url,
      bundle: 'bench',
      profile: 'sim',
      offers: models.map(offer),
    },
  ],
}
const { config: file, key } = await benchGateway('.', dir, sim.info.base_url, {
  accounts: Number(o.accounts),
  config,
})
const heapDir = join('bench', 'results', 'heap')
if (o.heap) mkdirSync(heapDir, { recursive: true })
const gw = await startGateway(file, {
  nodeArgs: [...nodeArgsOf(o), ...(o.heap ? [`--heapsnapshot-signal=SIGUSR2`, `--diagnostic-dir=${heapDir}`] : [])],
})
const url = `${gw.info.base_url}/v1/chat/completions`

const seconds = Number(o.minutes) * 60
const samples = []
const minuteMarks = []
const started = performance.now()
const timer = setInterval(() => {
  const s = {
    at: Math.round((performance.now() - started) / 1000),
    gateway: rssMb(gw.child.pid),
    upstream: rssMb(sim.child.pid),
  }
  samples.push(s)
  if (s.at > 0 && s.at % 60 === 0) {
    minuteMarks.push(s)
    if (o.heap && (s.at === 60 || s.at >= seconds - 1)) process.kill(gw.child.pid, 'SIGUSR2')
    process.stderr.write(
      `minute ${s.at / 60}: gateway ${s.gateway.toFixed(0)} MB, upstream ${s.upstream.toFixed(0)} MB\n`,
    )
  }
}, 1000)
// One loop per model and mode; the connections shared among them as evenly as they divide.
const loops = models.flatMap((m) => modes.map((mode) => ({ model: m, stream: mode === 'stream' })))
const c = Number(o.concurrency)
const share = (i) => Math.max(1, Math.floor(c / loops.length) + (i < c % loops.length ? 1 : 0))
const runs = await Promise.all(
  loops.map(({ model: m, stream }, i) =>
    load(url, { model: m, messages: MESSAGES, max_tokens: 64, stream }, { concurrency: share(i), seconds, key }),
  ),
)
clearInterval(timer)
const end = samples.at(-1)
const first = minuteMarks[0] ?? samples[Math.min(59, samples.length - 1)]
// V8's old space grows by tens of MB between major collections, so a single reading swings with its rhythm: each
// minute's floor (its lowest reading, just after a collection) is what a leak would raise.
const floors = minuteMarks.map((m) =>
  Math.min(...samples.filter((s) => s.at > m.at - 60 && s.at <= m.at).map((s) => s.gateway)),
)
const requests = runs.reduce((n, r) => n + r.requests, 0)
const errors = runs.reduce((n, r) => n + (r.errors ?? 0), 0)
const result = {
  minutes: Number(o.minutes),
  concurrency: loops.reduce((n, _, i) => n + share(i), 0),
  accounts: Number(o.accounts),
  models: models.length,
  requests,
  errors,
  rps: Math.round(requests / seconds),
  gateway_rss_mb_after_1_min: +first.gateway.toFixed(1),
  gateway_rss_mb_at_end: +end.gateway.toFixed(1),
  gateway_rss_mb_max: +Math.max(...samples.map((s) => s.gateway)).toFixed(1),
  gateway_end_over_first_minute: +(end.gateway / first.gateway).toFixed(3),
  gateway_by_minute_over_first: minuteMarks.map((s) => +(s.gateway / first.gateway).toFixed(3)),
  gateway_floor_mb_by_minute: floors.map((f) => +f.toFixed(1)),
  gateway_last_floor_over_first: floors.length ? +(floors.at(-1) / floors[0]).toFixed(3) : null,
  upstream_end_over_first_minute: +(end.upstream / first.upstream).toFixed(3),
}
mkdirSync(join('bench', 'results'), { recursive: true })
writeFileSync(join('bench', 'results', `memory-${Date.now()}.json`), `${JSON.stringify({ ...result, samples })}\n`)
console.log(
  `memory: ${result.minutes} min at c=${result.concurrency} (${modes.join(' and ')}, ${result.models} models, ` +
    `${result.accounts} keys): ${result.rps} req/s, ${errors} errors`,
)
console.log(
  `  gateway RSS ${result.gateway_rss_mb_after_1_min} MB after 1 min → ${result.gateway_rss_mb_at_end} MB at the end ` +
    `(max ${result.gateway_rss_mb_max}): ${result.gateway_end_over_first_minute}× the first minute's ` +
    `(by minute: ${result.gateway_by_minute_over_first.join(', ')})`,
)
console.log(
  `  gateway RSS floor by minute: ${result.gateway_floor_mb_by_minute.join(', ')} MB: the last ` +
    `${result.gateway_last_floor_over_first}× the first`,
)
console.log(`  upstream RSS (control): ${result.upstream_end_over_first_minute}× its first minute's`)
gw.child.kill('SIGTERM')
sim.child.kill('SIGTERM')
process.exit(0)
