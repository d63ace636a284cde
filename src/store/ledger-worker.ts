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

function answer(ids: number[], outcomes: Outcome[]): void {
  if (ids.length > 0) port.postMessage({ done: ids.map((id, i) => [id, outcomes[i]!]) } satisfies FromLedgerThread)
}

port.on('message', (first: ToLedgerThread) => {
  const ops: NonNullable<ToLedgerThread['ops']> = []
  let closing = false
  for (let m: ToLedgerThread | undefined = first; m; m = receiveMessageOnPort(port)?.message as ToLedgerThread | undefined) {
    if (m.ops) ops.push(...m.ops)
    if (m.autocheckpoint) db.pragma('wal_autocheckpoint = 1000')
    if (m.close) closing = true
  }
  if (ops.length > 0) {
    const outcomes = ledger.runGroup(ops.map(([, op]) => op))
    const now: number[] = []
    const nowOutcomes: Outcome[] = []
    const durable: number[] = []
    const durableOutcomes: Outcome[] = []
    ops.forEach(([id, op], i) => {
      const o = outcomes[i]!
      if (op.kind === 'capture' && o.ok) {
        durable.push(id)
        durableOutcomes.push(o)
      } else {
        now.push(id)
        nowOutcomes.push(o)
      }
    })
    answer(now, nowOutcomes)
    if (durable.length > 0) {
      try {
        syncWal()
      } catch (error) {
        // After a failed fsync the kernel may have dropped the pages it could not write, and a later fsync succeed:
        // frames chain their checksums, so captures acknowledged after the hole would be lost on recovery. Stop.
        port.postMessage({ done: durable.map((id) => [id, { ok: false, error }]), fatal: String(error) } satisfies FromLedgerThread)
        db.close()
        process.exit(1)
      }
      answer(durable, durableOutcomes)
    }
  }
  if (closing) {
    db.close()
    if (wal !== undefined) closeSync(wal)
    port.close()
  }
})
