// Gateways sharing one store, the same load in one run: one process on SQLite, one on Postgres, two and three on
// Postgres (the load split evenly between them), plain requests at --concurrency in all. Each setup is measured in
// --rounds interleaved rounds over fresh stores; the table shows medians, with req/s as the median of per-round ratios
// to one process on SQLite, and the machine's CPU per request (every process: gateways, Postgres, the load generator
// and the upstream). On a 2-core machine the setups of several processes share the same two cores: their figures say
// what sharing one store costs, not what more machines would add. Usage: npm run bench:cluster [-- --concurrency 32
// --seconds 5 --rounds 3 --accounts 1 --tokens 16] (--accounts: requests spread over that many funded accounts)
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { benchGateway, BENCH_MODEL, load, machineCpuUs, median, MESSAGES, start, startGateway } from './processes.mjs'
import { benchOptions } from './options.mjs'

const o = benchOptions(import.meta.url, {
  concurrency: { type: 'string', default: '32' },
  seconds: { type: 'string', default: '5' },
  rounds: { type: 'string', default: '3' },
  accounts: { type: 'string', default: '1' },
  tokens: { type: 'string', default: '16' },
})
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const SETUPS = [
  { name: '1 process, SQLite', store: 'sqlite', processes: 1 },
  { name: '1 process, Postgres', store: 'postgres', processes: 1 },
  { name: '2 processes, Postgres', store: 'postgres', processes: 2 },
  { name: '3 processes, Postgres', store: 'postgres', processes: 3 },
]
const c = Number(o.concurrency)
const seconds = Number(o.seconds)
const body = { model: BENCH_MODEL, messages: MESSAGES, max_tokens: Number(o.tokens) }

const dirs = []
const schemas = []
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 })
process.on('exit', () => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))

const sim = await start(['dist/cli/main.js', 'sim-provider', '--port', '0', '--json', '--reply-tokens', o.tokens])

/** The setup's gateway processes over a fresh store, funded; their URLs and the key (or keys) to send with. */
async function cluster(setup) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-cluster-'))
  dirs.push(dir)
  let extra = {}
  if (setup.store === 'postgres') {
    const schema = `bench_cluster_${process.pid}_${schemas.length}`
    schemas.push(schema)
    const url = new URL(DATABASE_URL)
    url.searchParams.set('schema', schema)
    extra = { store: url.toString() }
  }
  const accounts = Number(o.accounts)
  const { config, key } = await benchGateway('.', dir, sim.info.base_url, { accounts, config: extra })
  const gateways = []
  for (let i = 0; i < setup.processes; i++) gateways.push(await startGateway(config))
  return { gateways, key, urls: gateways.map((g) => `${g.info.base_url}/v1/chat/completions`) }
}

/** The load split over the cluster's processes (concurrency shared out evenly); requests per second in all. */
async function measure(cl, secs, warmup) {
  const share = (i) => Math.floor(c / cl.urls.length) + (i < c % cl.urls.length ? 1 : 0)
  const before = machineCpuUs()
  const runs = await Promise.all(
    cl.urls.map((url, i) => load(url, body, { concurrency: share(i), seconds: secs, warmup, key: cl.key })),
  )
  const after = machineCpuUs()
  const requests = runs.reduce((n, r) => n + r.requests, 0)
  const rps = runs.reduce((n, r) => n + r.rps, 0)
  const errors = runs.reduce((n, r) => n + (r.errors ?? 0), 0)
  return { rps, errors, cpu: (after.busy - before.busy) / (requests * (1 + warmup / secs)) }
}

const figures = new Map(SETUPS.map((s) => [s, []]))
for (let round = 0; round < Number(o.rounds); round++) {
  const order = round % 2 ? [...SETUPS].reverse() : SETUPS
  for (const setup of order) {
    const cl = await cluster(setup)
    await measure(cl, 2, 0)
    figures.get(setup).push(await measure(cl, seconds, 0.5))
    for (const g of cl.gateways) {
      g.child.kill('SIGKILL')
      await new Promise((resolve) => g.child.once('exit', resolve))
    }
  }
}
for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
await admin.end()

const base = figures.get(SETUPS[0])
console.log(
  `\nCluster: plain requests at concurrency ${c}, ${o.accounts} account(s), ${o.rounds} rounds of ${seconds} s per setup`,
)
console.table(
  SETUPS.map((s) => {
    const f = figures.get(s)
    return {
      setup: s.name,
      'req/s': Math.round(median(f.map((x) => x.rps))),
      'ratio to 1 on SQLite': +median(f.map((x, i) => x.rps / base[i].rps)).toFixed(3),
      'machine CPU µs/req': Math.round(median(f.map((x) => x.cpu))),
      errors: f.reduce((n, x) => n + x.errors, 0),
    }
  }),
)
process.exit(0)
