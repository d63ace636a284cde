// Admission + capture pairs per second on SQLite and Postgres, through the store the gateway uses. Pairs on one account
// (every request contends for one row) and spread over as many accounts as workers. Baseline, measured in the same run
// on the same store: one usage record per request through the same grouped path, committed (the pairs' captures also
// wait for the WAL sync): the least any per-request accounting could cost. Usage: npm run bench:ledger [-- --seconds 5
// --concurrency 32]
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { openStore } from '../dist/store/open.js'
import { SYSTEM_ACCOUNTS } from '../dist/store/accounts.js'
import { benchOptions } from './options.mjs'

const values = benchOptions(import.meta.url, {
  seconds: { type: 'string', default: '4' },
  concurrency: { type: 'string', default: '32' },
})
const seconds = Number(values.seconds)
const concurrency = Number(values.concurrency)
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

async function postgresUp() {
  const c = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 2000 })
  try {
    await c.connect()
    return true
  } catch {
    return false
  } finally {
    await c.end().catch(() => {})
  }
}

const usage = (requestId, accountId, cost) => ({
  requestId,
  accountId,
  keyId: 'key_bench',
  model: 'svc/bench@1',
  servedModel: 'svc/bench@1',
  provider: '0xbench',
  stream: false,
  promptTokens: 20,
  completionTokens: 40,
  upstreamPromptTokens: 20,
  upstreamCompletionTokens: 40,
  cost,
  outcome: 'completed',
  latencyMs: 1,
  createdAt: Date.now(),
})

let seq = 0

async function run(loop) {
  let done = 0
  const end = performance.now() + seconds * 1000
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (performance.now() < end) {
        await loop(`r${process.pid}_${seq++}`, worker)
        done++
      }
    }),
  )
  return done / seconds
}

async function bench(kind, url) {
  const store = await openStore(url)
  try {
    const users = []
    for (let i = 0; i < concurrency; i++) {
      const id = (await store.accounts.ensure(`0x${(0xb100 + i).toString(16).padStart(40, '0')}`, 'user', Date.now()))
        .account.id
      await store.accounts.deposit({ id, amount: 10n ** 15n, ref: `dep_bench_${i}`, now: Date.now() })
      await store.accounts.approve(id, 10n ** 15n)
      users.push(id)
    }
    const user = users[0]
    const payee = (await store.accounts.ensure('0x00000000000000000000000000000000000000b2', 'provider', Date.now()))
      .account.id
    const fees = (await store.accounts.byAddress(SYSTEM_ACCOUNTS.fees)).id
    const baseline = await run(async (id) => {
      await store.ledger.record(usage(`b_${id}`, user, 30n))
    })
    const pair = (spread) => async (id, worker) => {
      const accountId = spread ? users[worker] : user
      const now = Date.now()
      const held = await store.ledger.hold({
        requestId: id,
        accountId,
        keyId: 'key_bench',
        model: 'svc/bench@1',
        amount: 100n,
        owner: 'bench',
        now,
        expiresAt: now + 600_000,
      })
      if (!held.ok) throw new Error('hold refused')
      // Resolves once durable.
      await store.ledger.capture({
        requestId: id,
        cost: 30n,
        payeeId: payee,
        fee: 1n,
        feeAccountId: fees,
        now,
        usage: usage(id, accountId, 30n),
      })
    }
    const oneAccount = await run(pair(false))
    const manyAccounts = await run(pair(true))
    const audit = await store.ledger.audit()
    if (audit.unbalanced.length || audit.inconsistent.length)
      throw new Error('ledger invariants broken by the benchmark')
    return {
      store: kind,
      'baseline records/s': Math.round(baseline),
      'pairs/s, one account': Math.round(oneAccount),
      'ratio (one)': +(oneAccount / baseline).toFixed(3),
      [`pairs/s, ${concurrency} accounts`]: Math.round(manyAccounts),
      'ratio (many)': +(manyAccounts / baseline).toFixed(3),
    }
  } finally {
    await store.close()
  }
}

const rows = [await bench('sqlite', `sqlite:${join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'svc.db')}`)]
if (await postgresUp()) {
  const u = new URL(DATABASE_URL)
  u.searchParams.set('schema', `bench_${process.pid}`)
  rows.push(await bench('postgres', u.toString()))
  const c = new pg.Client({ connectionString: DATABASE_URL })
  await c.connect()
  await c.query(`drop schema if exists bench_${process.pid} cascade`)
  await c.end()
} else {
  console.error('postgres unreachable: skipped')
}
console.log(`ledger benchmark: ${seconds} s per figure, ${concurrency} concurrent requests`)
console.table(rows)
