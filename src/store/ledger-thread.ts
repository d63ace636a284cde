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
  /** The thread finished what it was sent: the next batch may go. */
  idle?: boolean
  /** The WAL could not be synced: the thread answered what it had and stops. */
  fatal?: string
}

interface Waiter {
  op: LedgerOp
  resolve: (v: never) => void
  reject: (e: unknown) => void
}

/** What the thread needs from the checkpointer: a gate before writes, and word when it is gone. */
export interface WalKeeper {
  beforeWrite(): Promise<void>
  readonly lost: Promise<void>
}

// Worker threads run JavaScript: under the test runner, which loads these sources as TypeScript, the thread is the
// compiled copy that `npm run build` wrote (npm test builds first).
const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? '../../dist/store/ledger-worker.js' : './ledger-worker.js', import.meta.url)

/**
 * The hot ledger on a SQLite file, run by a thread of its own (`ledger-worker.ts`) so that statements, commits and
 * WAL syncs leave the event loop. One batch at a time is with the thread: what arrives meanwhile crosses as the next
 * batch, in one message, and is one transaction there. A capture resolves once it is on disk; a hold or release once committed.
 * Admission stays one conditional UPDATE in the store, so other processes and connections remain safe beside it.
 */
export class SqliteLedgerThread extends QueuedLedger {
  private worker: Worker | undefined
  private readonly waiting = new Map<number, Waiter>()
  private nextId = 0
  private queue: number[] = []
  /** A batch is with the thread: what arrives meanwhile waits for it, and goes as one batch (one wake-up, one group). */
  private busy = false
  /** The batch with a thread (sent, not wholly answered): what is replayed if that thread dies. */
  private inFlight: { worker: Worker; ids: number[] } | undefined
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

  /** Queues an operation for the next batch. A pending setImmediate or a referenced thread keeps the process alive. */
  private schedule(id: number): void {
    if (this.queue.length === 0 && !this.busy) setImmediate(this.post)
    this.queue.push(id)
    this.worker?.ref()
  }

  private readonly post = () => {
    if (this.busy || this.queue.length === 0) return
    this.busy = true
    const ids = this.queue
    this.queue = []
    const send = () => {
      const live = ids.filter((id) => this.waiting.has(id))
      if (live.length === 0) return this.idle()
      try {
        const worker = this.thread()
        worker.postMessage({ ops: live.map((id) => [id, this.waiting.get(id)!.op]) } satisfies ToLedgerThread)
        this.inFlight = { worker, ids: live }
      } catch (err) {
        for (const id of live) this.answer(id, { ok: false, error: err })
        this.idle()
      }
    }
    // One batch at a time reaches the gate, so batches leave it in order.
    void this.walKeeper.beforeWrite().then(send, send)
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
    const sent = this.inFlight?.worker === w ? this.inFlight.ids : []
    if (this.inFlight?.worker === w) {
      this.inFlight = undefined
      this.busy = false
    }
    if (this.failed) {
      for (const id of [...this.waiting.keys()]) this.answer(id, { ok: false, error: this.failed })
      this.queue = []
      return
    }
    let lost = 0
    for (const id of sent) {
      const waiter = this.waiting.get(id)
      if (!waiter) continue
      lost++
      if (waiter.op.replay) this.answer(id, { ok: false, error: new Error(`the ledger thread stopped twice (exit code ${code}) with this operation in flight`) })
      else {
        waiter.op = { ...waiter.op, replay: true }
        this.schedule(id)
      }
    }
    if (lost > 0 && !this.closed) this.log(`ledger thread stopped (exit code ${code}) with ${lost} operations in flight; sent to a new thread`)
    this.post()
  }

  private settle(m: FromLedgerThread): void {
    if (m.fatal) {
      this.failed = new Error(`the ledger cannot write to disk (${m.fatal}); nothing more is charged until the gateway restarts on a sound disk`)
      this.log(this.failed.message)
    }
    for (const [id, o] of m.done) this.answer(id, o)
    if (m.idle) this.idle()
  }

  private idle(): void {
    this.inFlight = undefined
    this.busy = false
    this.post()
  }

  private answer(id: number, o: Outcome): void {
    const w = this.waiting.get(id)
    if (!w) return
    this.waiting.delete(id)
    if (this.waiting.size === 0) this.worker?.unref()
    if (o.ok) w.resolve(o.value as never)
    else w.reject(o.error)
  }
}
