// The ledger's statements alone, today's shape against the prototype of bench/shapes/once-at-close.mjs (a request's
// record written once, when it closes): each on its own migrated SQLite file, one account, groups of holds then
// groups of their captures, run in turn (interleaved, order alternating) in one process. Printed per group size:
// CPU µs per hold + capture pair (user + system, this process) and WAL frames per pair, medians of the runs, and the
// ratio prototype/today. No WAL sync, no gateway: what the statements and commits cost.
// Usage: npm run bench:shapes [-- --groups-of 1,3,8 --groups 1500 --runs 6]
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { openStore } from '../../dist/store/open.js'
import { SYSTEM_ACCOUNTS } from '../../dist/store/accounts.js'
import { sqliteLedgerOps as todayOps } from '../../dist/store/sqlite-ledger-ops.js'
import { sqliteLedgerOps as prototypeOps } from './once-at-close.mjs'
import { benchOptions } from '../options.mjs'

const o = benchOptions(import.meta.url, { 'groups-of': { type: 'string', default: '1,3,8' }, groups: { type: 'string', default: '1500' }, runs: { type: 'string', default: '6' } })
const dir = mkdtempSync(join(tmpdir(), 'svc-shapes-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]

async function ledger(name, ops) {
  const path = join(dir, `${name}.db`)
  const store = await openStore(`sqlite:${path}`)
  const now = Date.now()
  const payer = (await store.accounts.ensure(`0x${'b1'.padStart(40, '0')}`, 'user', now)).account.id
  await store.accounts.deposit(payer, 10n ** 15n, 'dep', now)
  await store.accounts.approve(payer, 10n ** 15n)
  const payee = (await store.accounts.ensure(`0x${'b2'.padStart(40, '0')}`, 'provider', now)).account.id
  const fees = (await store.accounts.byAddress(SYSTEM_ACCOUNTS.fees)).id
  await store.close()
  const raw = new BetterSqlite3(path)
  raw.pragma('synchronous = NORMAL')
  raw.pragma('foreign_keys = ON')
  // The WAL grows through a run (checkpointed between runs), so its size counts the frames written.
  raw.pragma('wal_autocheckpoint = 0')
  raw.defaultSafeIntegers(true)
  return { name, raw, wal: `${path}-wal`, ledger: ops(raw), payer, payee, fees }
}

let seq = 0
/** `groups` groups of `size` holds, each followed by the group of their captures; throws if one was refused. */
function pairs(l, size, groups) {
  for (let g = 0; g < groups; g++) {
    const now = Date.now()
    const ids = Array.from({ length: size }, () => `req_01M86S${String(seq++).padStart(20, '0')}`)
    const held = l.ledger.runGroup(ids.map((requestId) => ({ kind: 'hold', hold: { requestId, accountId: l.payer, keyId: 'key_bench', model: 'svc/bench@1', amount: 1000n, owner: 'gw_0123456789abcdef', now, expiresAt: now + 600_000 } })))
    const usage = (requestId) => ({ requestId, accountId: l.payer, keyId: 'key_bench', model: 'svc/bench@1', servedModel: 'svc/bench@1', provider: '0xbench', stream: false,
      promptTokens: 16, completionTokens: 64, upstreamPromptTokens: 16, upstreamCompletionTokens: 64, cost: 41n, outcome: 'completed', latencyMs: 1, createdAt: now })
    const captured = l.ledger.runGroup(ids.map((requestId) => ({ kind: 'capture', capture: { requestId, cost: 41n, payeeId: l.payee, fee: 2n, feeAccountId: l.fees, now, usage: usage(requestId) } })))
    if (![...held, ...captured].every((r) => r.ok && (r.value === true || r.value.ok))) throw new Error(`${l.name}: a hold or capture failed`)
  }
}

const shapes = [await ledger('today', todayOps), await ledger('prototype', prototypeOps)]
const rows = []
for (const size of o['groups-of'].split(',').map(Number)) {
  const groups = Math.max(50, Math.round(Number(o.groups) * 3 / size / 2))
  const got = new Map(shapes.map((l) => [l.name, { cpu: [], frames: [] }]))
  for (const l of shapes) pairs(l, size, groups) // warm-up: code compiled, tables past their first pages
  for (let r = 0; r < Number(o.runs); r++) {
    for (const l of r % 2 ? [...shapes].reverse() : shapes) {
      l.raw.pragma('wal_checkpoint(TRUNCATE)')
      const before = process.cpuUsage()
      pairs(l, size, groups)
      const cpu = process.cpuUsage(before)
      const frames = (statSync(l.wal).size - 32) / (1024 + 24)
      got.get(l.name).cpu.push((cpu.user + cpu.system) / (groups * size))
      got.get(l.name).frames.push(frames / (groups * size))
    }
  }
  const [t, p] = shapes.map((l) => got.get(l.name))
  rows.push({
    'groups of': size, 'today µs/pair': +median(t.cpu).toFixed(1), 'prototype µs/pair': +median(p.cpu).toFixed(1), 'prototype/today CPU': +(median(p.cpu) / median(t.cpu)).toFixed(3),
    'today frames/pair': +median(t.frames).toFixed(2), 'prototype frames/pair': +median(p.frames).toFixed(2),
  })
}
console.log(`Ledger statements alone, ${o.runs} interleaved runs per figure (medians), one account, 1 KiB pages`)
console.table(rows)
