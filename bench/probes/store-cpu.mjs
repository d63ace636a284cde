// Where one gateway's CPU goes on each store: one process on SQLite, then one on Postgres, the same plain load at
// --concurrency; per request, the gateway's CPU (and of it the kernel's, on its behalf), the Postgres server's (every
// `postgres` process of the machine), the simulated upstream's, the load generator's, the machine's, and the
// database's transactions and rows written. With --profile DIR each gateway writes a .cpuprofile
// there (node --cpu-prof; bench/probes/profile-top.mjs reads one). Usage: npm run build && node
// bench/probes/store-cpu.mjs [--concurrency 32 --seconds 6 --profile DIR --stores sqlite,postgres]
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import {
  benchGateway,
  BENCH_MODEL,
  cpuUs,
  TICK_US,
  load,
  machineCpuUs,
  MESSAGES,
  start,
  startGateway,
} from '../processes.mjs'
import { benchOptions } from '../options.mjs'

const o = benchOptions(import.meta.url, {
  concurrency: { type: 'string', default: '32' },
  seconds: { type: 'string', default: '6' },
  tokens: { type: 'string', default: '16' },
  profile: { type: 'string' },
  stores: { type: 'string', default: 'sqlite,postgres' },
})
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const body = { model: BENCH_MODEL, messages: MESSAGES, max_tokens: Number(o.tokens) }
const dir = mkdtempSync(join(tmpdir(), 'svc-store-cpu-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
const schema = `bench_store_cpu_${process.pid}`

/** A process's system (kernel) CPU time so far (µs): its sockets' sends and receives, its syncs. */
function sysUs(pid) {
  return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[12]) * TICK_US
}

/** CPU so far of every process named `postgres` (µs). */
function postgresCpuUs() {
  let total = 0
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') total += cpuUs(pid)
    } catch {
      // Gone meanwhile.
    }
  }
  return total
}

const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 })
/** The database's transactions so far, and the rows its statements inserted and updated. */
async function databaseCounts() {
  const { rows } = await admin.query(
    'SELECT xact_commit + xact_rollback AS x, tup_inserted AS i, tup_updated AS u FROM pg_stat_database WHERE datname = current_database()',
  )
  await admin.query('SELECT pg_stat_clear_snapshot()')
  return rows[0]
}

const sim = await start(['dist/cli/main.js', 'sim-provider', '--port', '0', '--json', '--reply-tokens', o.tokens])
const rows = []
for (const kind of o.stores.split(',')) {
  const url = new URL(DATABASE_URL)
  url.searchParams.set('schema', schema)
  const store = kind === 'postgres' ? url.toString() : `sqlite:${join(dir, 'svc.db')}`
  const { config, key } = await benchGateway('.', join(dir), sim.info.base_url, { config: { store } })
  const nodeArgs = o.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(o.profile, kind)}`] : []
  const gw = await startGateway(config, { nodeArgs })
  const target = `${gw.info.base_url}/v1/chat/completions`
  const concurrency = Number(o.concurrency)
  await load(target, body, { concurrency, seconds: 2, key })
  const [g0, s0, u0, p0, m0, d0] = [
    cpuUs(gw.child.pid),
    sysUs(gw.child.pid),
    cpuUs(sim.child.pid),
    postgresCpuUs(),
    machineCpuUs().busy,
    await databaseCounts(),
  ]
  const r = await load(target, body, { concurrency, seconds: Number(o.seconds), key })
  const n = r.requests
  // The statistics collector reports within a second or so.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  const d1 = await databaseCounts()
  const per = (k) => (kind === 'postgres' ? +((d1[k] - d0[k]) / n).toFixed(2) : '')
  rows.push({
    store: kind,
    'req/s': Math.round(r.rps),
    'gateway CPU µs/req': Math.round((cpuUs(gw.child.pid) - g0) / n),
    'of it system': Math.round((sysUs(gw.child.pid) - s0) / n),
    'Postgres CPU µs/req': Math.round((postgresCpuUs() - p0) / n),
    'upstream CPU µs/req': Math.round((cpuUs(sim.child.pid) - u0) / n),
    'load generator CPU µs/req': r.cpu_us_per_request,
    'machine CPU µs/req': Math.round((machineCpuUs().busy - m0) / n),
    'transactions/req': per('x'),
    'rows inserted/req': per('i'),
    'rows updated/req': per('u'),
  })
  const exited = new Promise((resolve) => gw.child.once('exit', resolve))
  gw.child.kill('SIGTERM')
  await exited
}
await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
await admin.end()
console.table(rows)
process.exit(0)
