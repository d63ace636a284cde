import { closeSync, fdatasyncSync, openSync } from 'node:fs'
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads'
import BetterSqlite3 from 'better-sqlite3'
import { sqliteLedgerOps, type Outcome } from './sqlite-ledger-ops.js'
import type { LedgerThreadData, ToLedgerThread, FromLedgerThread } from './ledger-thread.js'

/**
 * The ledger thread: its own connection to the store's file, running the hot ledger's groups off the event loop.
 * Every message waiting when a group is done (what the event loop sent while it committed and synced) becomes the
 * next group. Holds and releases are answered once committed; captures once the WAL that holds them is on disk (one
 * fdatasync per group).
 */
const port = parentPort!
const { path, walLimitBytes, autocheckpoint } = workerData as LedgerThreadData
const db = new BetterSqlite3(path, { fileMustExist: true })
db.pragma('busy_timeout = 5000')
db.pragma('synchronous = NORMAL')
db.pragma('foreign_keys = ON')
// Checkpoints belong to the checkpointer thread while it runs.
if (!autocheckpoint) db.pragma('wal_autocheckpoint = 0')
// This connection writes most: it is the one that starts the WAL over, and truncates it then.
db.pragma(`journal_size_limit = ${walLimitBytes}`)
db.defaultSafeIntegers(true)
const ledger = sqliteLedgerOps(db)
let wal: number | undefined

function syncWal(): void {
  wal ??= openSync(`${path}-wal`, 'r')
  fdatasyncSync(wal)
}

/** Groups committed before one WAL sync at most: operations that arrive while a group commits join its sync. */
const GROUPS_PER_SYNC = 4
let closing = false

/** The operations of every message waiting (`first`: the one the event delivered). */
function take(first?: ToLedgerThread): NonNullable<ToLedgerThread['ops']> {
  const ops: NonNullable<ToLedgerThread['ops']> = []
  for (let m = first ?? next(); m; m = next()) {
    if (m.ops) ops.push(...m.ops)
    if (m.autocheckpoint) db.pragma('wal_autocheckpoint = 1000')
    if (m.close) closing = true
  }
  return ops
}

function next(): ToLedgerThread | undefined {
  return receiveMessageOnPort(port)?.message as ToLedgerThread | undefined
}

port.on('message', (first: ToLedgerThread) => {
  const durable: [id: number, outcome: Outcome][] = []
  let ops = take(first)
  // Each group answers its holds and releases once committed. Before the sync that its captures wait for, what
  // arrived meanwhile commits too (a group of its own), and shares that sync instead of waiting for the next cycle.
  for (let groups = 0; ops.length > 0; groups++) {
    const outcomes = ledger.runGroup(ops.map(([, op]) => op))
    const now: [id: number, outcome: Outcome][] = []
    ops.forEach(([id, op], i) => (op.kind === 'capture' && outcomes[i]!.ok ? durable : now).push([id, outcomes[i]!]))
    if (now.length > 0) port.postMessage({ done: now } satisfies FromLedgerThread)
    if (durable.length === 0 || groups + 1 >= GROUPS_PER_SYNC) break
    ops = take()
  }
  if (durable.length > 0) {
    try {
      syncWal()
    } catch (error) {
      // After a failed fsync the kernel may have dropped the pages it could not write, and a later fsync succeed:
      // frames chain their checksums, so captures acknowledged after the hole would be lost on recovery. Stop.
      port.postMessage({ done: durable.map(([id]) => [id, { ok: false, error }]), fatal: String(error) } satisfies FromLedgerThread)
      db.close()
      process.exit(1)
    }
    port.postMessage({ done: durable } satisfies FromLedgerThread)
  }
  if (closing) {
    db.close()
    if (wal !== undefined) closeSync(wal)
    port.close()
  }
})
