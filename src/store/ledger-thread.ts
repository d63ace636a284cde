import { Worker } from 'node:worker_threads'
import { QueuedLedger, type LedgerOp, type Outcome } from './sqlite-ledger-ops.js'

export interface LedgerThreadData {
  /** The database file (absolute). */
  path: string
  /** The size SQLite truncates the WAL to when this connection starts it over. */
  walLimitBytes: number
  /** Whether the thread's connection checkpoints by itself (only when the checkpointer thread is gone). */
  autocheckpoint: boolean
}

export interface ToLedgerThread {
  ops?: [id: number, op: LedgerOp][]
  autocheckpoint?: true
  close?: true
}

export interface FromLedgerThread {
  done: [id: number, outcome: Outcome][]
  /** The WAL could not be synced: the thread answered what it had and stops. */
  fatal?: string
}

interface Waiter {
  op: LedgerOp
  resolve: (v: never) => void
  reject: (e: unknown) => void
  /** The thread it was sent to, until answered: what is replayed if that thread dies. */
  thread?: Worker
}

/** What the thread needs from the checkpointer: a gate before writes, and word when it is gone. */
export interface WalKeeper {
  /** A tail checkpoint is due: it must run with none of the ledger's writes under way. */
  readonly tailDue: boolean
  beforeWrite(): Promise<void>
  readonly lost: Promise<void>
}

// Worker threads run JavaScript: under the test runner, which loads these sources as TypeScript, the thread is the
// compiled copy that `npm run build` wrote (npm test builds first).
const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? '../../dist/store/ledger-worker.js' : './ledger-worker.js', import.meta.url)

/**
 * The hot ledger on a SQLite file, run by a thread of its own (`ledger-worker.ts`) so that statements, commits and
 * WAL syncs leave the event loop. The operations of one event-loop turn cross in one message; the thread makes one
 * group (one transaction) of every message waiting when it is free, so the group grows with the load by itself and
 * the thread never waits for the event loop to send more. A capture resolves once it is on disk; a hold or release
 * once committed. Admission stays one conditional UPDATE in the store, so other processes and connections remain
 * safe beside it.
 */
export class SqliteLedgerThread extends QueuedLedger {
  private worker: Worker | undefined
  private readonly waiting = new Map<number, Waiter>()
  private nextId = 0
  /** Operations of this turn, sent at its end. */
  private queue: number[] = []
  private scheduled = false
  /** Operations with a thread, not yet answered. */
  private sent = 0
  /** A tail checkpoint is running: nothing is sent until it ends. */
  private gated = false
  private checkpointerLost = false
  private closed = false
  /** Set when the WAL could not be synced: nothing more is written until an operator restarts on a sound disk. */
  private failed: Error | undefined
  private readonly walKeeper: WalKeeper

  constructor(private readonly file: { path: string; walLimitBytes: number; checkpointer: WalKeeper }, private readonly log: (msg: string) => void = (m) => console.error(m)) {
    super()
    this.walKeeper = file.checkpointer
    void this.walKeeper.lost.then(() => {
      this.checkpointerLost = true
      this.worker?.postMessage({ autocheckpoint: true } satisfies ToLedgerThread)
    })
  }

  async close(): Promise<void> {
    while (this.waiting.size > 0) await new Promise((resolve) => setTimeout(resolve, 2))
    this.closed = true
    const w = this.worker
    if (!w) return
    this.worker = undefined
    const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()))
    w.ref()
    w.postMessage({ close: true } satisfies ToLedgerThread)
    await exited
  }

  protected enqueue<T>(op: LedgerOp): Promise<T> {
    if (this.closed) return Promise.reject(new Error('the store is closed'))
    if (this.failed) return Promise.reject(this.failed)
    const id = ++this.nextId
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { op, resolve: resolve as (v: never) => void, reject })
      this.schedule(id)
    })
  }

  /** Queues an operation for this turn's message. A pending setImmediate or a referenced thread keeps the process alive. */
  private schedule(id: number): void {
    this.queue.push(id)
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(this.post)
    }
    this.worker?.ref()
  }

  private readonly post = () => {
    this.scheduled = false
    if (this.gated || this.queue.length === 0) return
    if (this.walKeeper.tailDue) {
      // The tail is checkpointed while none of the ledger's writes is under way: once the thread answered all it
      // has (`settle` posts again), the writes wait for the checkpoint.
      if (this.sent > 0) return
      this.gated = true
      const go = () => {
        this.gated = false
        this.send()
      }
      void this.walKeeper.beforeWrite().then(go, go)
      return
    }
    this.send()
  }

  private send(): void {
    const ids = this.queue
    this.queue = []
    const live = ids.filter((id) => this.waiting.has(id))
    if (live.length === 0) return
    try {
      const worker = this.thread()
      worker.postMessage({ ops: live.map((id) => [id, this.waiting.get(id)!.op]) } satisfies ToLedgerThread)
      for (const id of live) this.waiting.get(id)!.thread = worker
      this.sent += live.length
    } catch (err) {
      for (const id of live) this.answer(id, { ok: false, error: err })
    }
  }

  private thread(): Worker {
    if (this.worker) return this.worker
    if (this.failed) throw this.failed
    const w = new Worker(WORKER_URL, { workerData: { path: this.file.path, walLimitBytes: this.file.walLimitBytes, autocheckpoint: this.checkpointerLost } satisfies LedgerThreadData })
    w.on('message', (m: FromLedgerThread) => this.settle(m))
    w.on('error', (err) => this.log(`ledger thread failed: ${String(err)}`))
    w.once('exit', (code) => this.gone(w, code))
    // Referenced while answers are due: nothing else may be keeping the process alive.
    if (this.waiting.size === 0) w.unref()
    this.worker = w
    return w
  }

  /**
   * A thread died. What it had been sent and not answered may have committed: it goes once more to a new thread
   * marked as a replay, which answers from what was written (or does it now). Twice lost is refused; after a failed
   * WAL sync everything still waiting is.
   */
  private gone(w: Worker, code: number): void {
    if (this.worker !== w) return
    this.worker = undefined
    if (this.failed) {
      for (const id of [...this.waiting.keys()]) this.answer(id, { ok: false, error: this.failed })
      this.queue = []
      return
    }
    let lost = 0
    for (const [id, waiter] of this.waiting) {
      if (waiter.thread !== w) continue
      waiter.thread = undefined
      this.sent--
      lost++
      if (waiter.op.replay) this.answer(id, { ok: false, error: new Error(`the ledger thread stopped twice (exit code ${code}) with this operation in flight`) })
      else {
        waiter.op = { ...waiter.op, replay: true }
        this.schedule(id)
      }
    }
    if (lost > 0 && !this.closed) this.log(`ledger thread stopped (exit code ${code}) with ${lost} operations in flight; sent to a new thread`)
  }

  private settle(m: FromLedgerThread): void {
    if (m.fatal) {
      this.failed = new Error(`the ledger cannot write to disk (${m.fatal}); nothing more is charged until the gateway restarts on a sound disk`)
      this.log(this.failed.message)
    }
    for (const [id, o] of m.done) this.answer(id, o)
    // Operations held back for a tail checkpoint go once the thread has answered everything it had.
    if (this.sent === 0 && this.queue.length > 0 && !this.scheduled) this.post()
  }

  private answer(id: number, o: Outcome): void {
    const w = this.waiting.get(id)
    if (!w) return
    this.waiting.delete(id)
    if (w.thread) this.sent--
    if (this.waiting.size === 0) this.worker?.unref()
    if (o.ok) w.resolve(o.value as never)
    else w.reject(o.error)
  }
}
