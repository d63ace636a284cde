// Which B-trees a group of holds and a group of captures write: the frames each commit appends to the WAL, mapped to
// their tables and indexes through dbstat. Not a timing: every frame is a page written (two pwrite calls) and, for a
// capture, synced. Usage: npm run bench:pages [-- --accounts 32 --group 8 --groups 100]
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { openStore } from '../../dist/store/open.js'
import { SYSTEM_ACCOUNTS } from '../../dist/store/accounts.js'
import { sqliteLedgerOps } from '../../dist/store/sqlite/ledger-ops.js'
import { OpenHolds } from '../../dist/store/ledger/open-holds.js'
import { benchOptions } from '../options.mjs'

const o = benchOptions(import.meta.url, {
  accounts: { type: 'string', default: '32' },
  group: { type: 'string', default: '8' },
  groups: { type: 'string', default: '100' },
})
const accounts = Number(o.accounts)
const group = Number(o.group)
const dir = mkdtempSync(join(tmpdir(), 'svc-pages-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
const path = join(dir, 'svc.db')
const store = await openStore(`sqlite:${path}`)
const users = []
for (let i = 0; i < accounts; i++) {
  const id = (await store.accounts.ensure(`0x${(0xb100 + i).toString(16).padStart(40, '0')}`, 'user', Date.now()))
    .account.id
  await store.accounts.deposit({ id, amount: 10n ** 15n, ref: `dep_${i}`, now: Date.now() })
  await store.accounts.approve(id, 10n ** 15n)
  users.push(id)
}
const payee = (await store.accounts.ensure('0x00000000000000000000000000000000000000b2', 'provider', Date.now()))
  .account.id
const fees = (await store.accounts.byAddress(SYSTEM_ACCOUNTS.fees)).id
await store.close()

const raw = new BetterSqlite3(path)
raw.pragma('synchronous = NORMAL')
raw.pragma('foreign_keys = ON')
raw.pragma('wal_autocheckpoint = 0')
raw.defaultSafeIntegers(true)
const ledger = sqliteLedgerOps(raw, new OpenHolds())
const pageSize = Number(raw.pragma('page_size', { simple: true }))
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
/** Page numbers of the frames appended to the WAL from byte `offset` on. */
function framesFrom(offset) {
  const wal = readFileSync(`${path}-wal`)
  const pages = []
  for (let at = Math.max(offset, 32); at + 24 + pageSize <= wal.length; at += 24 + pageSize)
    pages.push(wal.readUInt32BE(at))
  return pages
}
const counts = { hold: new Map(), capture: new Map() }
const warm = 5 * Number(o.groups)
let seq = 0
for (let g = 0; g < warm + Number(o.groups); g++) {
  const ids = Array.from({ length: group }, (_, i) => [
    `req_${String(seq++).padStart(10, '0')}`,
    users[(g * group + i) % accounts],
  ])
  const now = Date.now()
  // The first groups fill the tables, so that what is measured are the pages of a store in use.
  if (g === warm) raw.pragma('wal_checkpoint(TRUNCATE)')
  for (const kind of ['hold', 'capture']) {
    const offset = g >= warm ? statSync(`${path}-wal`).size : 0
    ledger.runGroup(
      ids.map(([requestId, accountId]) =>
        kind === 'hold'
          ? {
              kind,
              hold: {
                requestId,
                accountId,
                keyId: 'k',
                model: 'm',
                amount: 100n,
                owner: 'o',
                now,
                expiresAt: now + 1e6,
              },
            }
          : {
              kind,
              capture: {
                requestId,
                cost: 30n,
                payeeId: payee,
                fee: 1n,
                feeAccountId: fees,
                now,
                usage: usage(requestId, accountId, 30n),
              },
            },
      ),
    )
    if (g < warm) continue
    const owner = new Map(
      raw
        .prepare('SELECT name, pageno FROM dbstat')
        .all()
        .map((r) => [Number(r.pageno), r.name]),
    )
    for (const page of framesFrom(offset)) {
      const name = owner.get(page) ?? '(free page)'
      counts[kind].set(name, (counts[kind].get(name) ?? 0) + 1)
    }
  }
}
raw.close()
console.log(
  `WAL frames per commit, groups of ${group} requests over ${accounts} account(s), ${pageSize}-byte pages, ${o.groups} groups`,
)
for (const kind of ['hold', 'capture']) {
  const rows = [...counts[kind]].sort((a, b) => b[1] - a[1])
  const total = rows.reduce((s, [, n]) => s + n, 0)
  console.log(`${kind}s: ${(total / Number(o.groups)).toFixed(1)} frames per commit`)
  console.table(Object.fromEntries(rows.map(([name, n]) => [name, { frames: +(n / Number(o.groups)).toFixed(2) }])))
}
