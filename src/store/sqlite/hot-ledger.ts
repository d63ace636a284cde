import { noDoubts } from './doubts.js'
import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from '../schema.js'
import { sqliteLedgerOps, type LedgerOp, type Outcome } from './ledger-ops.js'
import type { CaptureRequest, CommitObserver, HoldRequest, HoldResult, HotLedger } from '../ledger/types.js'
import type { UsageRecord } from '../usage.js'
import { BUSY_WAIT_MS, busyDelay, isBusyError } from './engine/patient-dialect.js'
import { WalSync, type SyncWays } from './engine/wal-sync.js'
import { OneAtATime } from './engine/one-at-a-time.js'
import { OpenHolds } from '../ledger/open-holds.js'

/** What the ledger needs from the checkpointer: a gate before its writes, and a stop without a last checkpoint. */
export interface WalKeeper {
  /** A tail checkpoint is due: the ledger's next writes wait for `beforeWrite`. */
  readonly tailDue: boolean
  beforeWrite(): Promise<void>
  halt(): Promise<void>
}

/** The database file a ledger writes: the WAL beside it is what a capture waits for. */
export interface SqliteFile {
  path: string
  checkpointer: WalKeeper
}

interface Pending {
  op: LedgerOp
  resolve: (v: never) => void
  reject: (e: unknown) => void
  /** When the database was first found locked by another process for this operation. */
  lockedSince?: number
  /** A capture whose request had the gateway to itself: no other request was admitted after it. */
  lone?: boolean
}

const isBusy = (o: Outcome) => !o.ok && isBusyError(o.error)

/**
 * What waits for a sync under way instead of committing in its turn: captures (they could not be acknowledged before
 * the next sync anyway), and releases, so that a release never overtakes a capture of the same hold queued before it.
 */
const waitsForSync = (p: Pending) => p.op.kind === 'capture' || p.op.kind === 'release'

/**
 * The hot ledger of a SQLite store: each event-loop turn's operations in one IMMEDIATE transaction on the loop's own
 * connection. Holds and releases resolve once committed, captures once their WAL is synced; a failed sync stops every
 * write of the store. Admission is one conditional UPDATE, safe beside the `svc` CLI (docs/architecture.md §15.14).
 */
export class SqliteHotLedger implements HotLedger {
  private readonly ledger
  private readonly wal: WalSync | undefined
  private queue: Pending[] = []
  private scheduled = false
  private running = false
  private backoff: NodeJS.Timeout | undefined
  private backoffMs = 0
  /** Operations enqueued and not yet settled; `close` waits for none. */
  private unsettled = 0
  private drained: (() => void)[] = []
  private closed = false
  private readonly pace = new OneAtATime()
  readonly open = new OpenHolds()
  onCommit: CommitObserver = () => {}

  constructor(
    private readonly raw: BetterSqlite3.Database,
    private readonly db: Kysely<Database>,
    private readonly file?: SqliteFile,
    sync?: SyncWays,
  ) {
    this.ledger = sqliteLedgerOps(raw, this.open)
    this.wal =
      file &&
      new WalSync(`${file.path}-wal`, { synced: () => this.schedule(), failed: (f) => this.stopWrites(f) }, sync)
  }

  /**
   * The WAL could not be synced: nothing more may be written through this connection (its other writes, deposits or
   * settlement, would be no more durable than the charges), and the checkpointer must not copy WAL pages of unknown
   * state into the database. Reads go on; a restart on a sound disk recovers from what the WAL holds.
   */
  private stopWrites(failure: Error): void {
    console.error(failure.message)
    this.raw.pragma('query_only = ON')
    void this.file?.checkpointer.halt()
  }

  hold(h: HoldRequest): Promise<HoldResult> {
    return this.enqueue({ kind: 'hold', hold: h })
  }

  capture(c: CaptureRequest): Promise<boolean> {
    return this.enqueue({ kind: 'capture', capture: c }, this.pace.leaves(c.requestId))
  }

  release(requestId: string, now: number, usage: UsageRecord): Promise<boolean> {
    this.pace.leaves(requestId)
    return this.enqueue({ kind: 'release', requestId, now, usage })
  }

  record(usage: UsageRecord): Promise<void> {
    return this.enqueue({ kind: 'record', usage })
  }

  private enqueue<T>(op: LedgerOp, lone = false): Promise<T> {
    if (this.closed) return Promise.reject(new Error('the store is closed'))
    if (this.wal?.failure) return Promise.reject(this.wal.failure)
    this.unsettled++
    return new Promise<T>((resolve, reject) => {
      let open = true
      const once =
        <A>(fn: (a: A) => void) =>
        (a: A) => {
          if (!open) return
          open = false
          fn(a)
          if (--this.unsettled === 0) for (const done of this.drained.splice(0)) done()
        }
      this.queue.push({ op, lone, resolve: once(resolve as (v: never) => void), reject: once(reject) })
      this.schedule()
    })
  }

  /** Runs what is queued at the end of this turn (unless a group is running or the database is locked). */
  private schedule(): void {
    if (this.scheduled || this.running || this.backoff || this.queue.length === 0) return
    this.scheduled = true
    setImmediate(() => void this.flush())
  }

  private readonly flush = async (): Promise<void> => {
    this.scheduled = false
    const syncing = this.wal?.syncing ?? false
    const group = syncing ? this.queue.filter((p) => !waitsForSync(p)) : this.queue
    if (group.length === 0) return
    this.queue = syncing ? this.queue.filter(waitsForSync) : []
    this.running = true
    try {
      await this.commit(group)
    } catch (err) {
      // A bug past the group's own handling: what it has not answered fails, and the ledger goes on.
      for (const p of group) p.reject(err)
    } finally {
      this.running = false
      this.schedule()
    }
  }

  private async commit(group: Pending[]): Promise<void> {
    if (this.file?.checkpointer.tailDue) await this.file.checkpointer.beforeWrite()
    const failure = this.wal?.failure
    if (failure) return group.forEach((p) => p.reject(failure))
    const ops = group.map((p) => p.op)
    const startedAt = performance.now()
    const run = () => {
      // Nested in an open transaction the group would be a savepoint, committed only with it: its captures must not
      // be synced and acknowledged as if committed.
      if (this.raw.inTransaction) throw new Error('the ledger found a transaction open on its connection')
      return this.ledger.runGroup(ops)
    }
    let outcomes: Outcome[]
    try {
      // Inside a transaction of Kysely's on this connection, the group waits for its end (for Kysely's connection);
      // otherwise nothing can come between the group's statements and it runs at once.
      outcomes = this.raw.inTransaction ? await this.db.connection().execute(async () => run()) : run()
    } catch (err) {
      for (const p of group) p.reject(err)
      return
    }
    const durable: [Pending, unknown][] = []
    const locked: Pending[] = []
    group.forEach((p, i) => {
      const o = outcomes[i]!
      const op = p.op
      if (isBusy(o) && this.stillPatient(p)) locked.push(p)
      else if (!o.ok) p.reject(o.error)
      else if (this.wal && op.kind === 'capture') durable.push([p, o.value])
      else {
        if (op.kind === 'hold' && (o.value as HoldResult).ok) this.pace.admitted(op.hold.requestId)
        p.resolve(o.value as never)
      }
    })
    const committed = () => this.onCommit(group.length - locked.length, performance.now() - startedAt)
    if (durable.length > 0) {
      const lone = durable.length === 1 && durable[0]![0].lone === true
      this.wal!.durable(this.pace.syncInline(lone)).then(
        () => {
          committed()
          durable.forEach(([p, value]) => p.resolve(value as never))
        },
        (err) => durable.forEach(([p]) => p.reject(err)),
      )
    } else if (locked.length < group.length) committed()
    if (locked.length > 0) this.retryLater(locked)
    else this.backoffMs = 0
  }

  private stillPatient(p: Pending): boolean {
    const now = Date.now()
    p.lockedSince ??= now
    return now - p.lockedSince < BUSY_WAIT_MS
  }

  /** Another process holds the write lock: these go first once a timer (1, 2, 4 … 16 ms) has let it finish. */
  private retryLater(locked: Pending[]): void {
    this.queue = [...locked, ...this.queue]
    this.backoffMs = busyDelay(this.backoffMs)
    this.backoff = setTimeout(() => {
      this.backoff = undefined
      this.schedule()
    }, this.backoffMs)
  }

  /** Resolves once every operation enqueued has settled (callers stop first) and the WAL is let go. */
  resolveDoubts(): Promise<number> {
    return noDoubts.resolve()
  }

  async close(): Promise<void> {
    if (this.unsettled > 0) await new Promise<void>((resolve) => this.drained.push(resolve))
    this.closed = true
    await this.wal?.close()
  }
}
