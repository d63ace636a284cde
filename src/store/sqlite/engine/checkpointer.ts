import { Worker } from 'node:worker_threads'

/**
 * Runs SQLite WAL checkpoints on a worker thread with its own connection. When the WAL passes its limit the writer
 * holds its next group until the worker has checkpointed the short tail (`beforeWrite`); else, under sustained writes,
 * it would grow without bound (docs/architecture.md §15.18).
 */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.module)
const db = new Database(workerData.path, { fileMustExist: true })
db.pragma('busy_timeout = 1000')
db.pragma('synchronous = NORMAL')
const run = () => {
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)')
    return r
  } catch (err) {
    parentPort.postMessage({ error: String(err) })
    return { busy: 1, log: -1, checkpointed: -1 }
  }
}
const timer = setInterval(() => {
  let r = run()
  // Past the limit, a second pass copies what was written during the first: the writer, once held, waits for a short
  // tail.
  if (r.log >= workerData.limitFrames) r = run()
  parentPort.postMessage({ report: r })
}, workerData.intervalMs)
parentPort.on('message', (m) => {
  if (m === 'now') parentPort.postMessage({ now: run() })
  if (m === 'stop') { clearInterval(timer); run(); db.close(); parentPort.postMessage({ stopped: true }) }
})
`

interface CheckpointResult {
  busy: number
  /** Frames in the WAL. */
  log: number
  /** Frames of it copied into the database. */
  checkpointed: number
}

type WorkerMessage = { report: CheckpointResult } | { now: CheckpointResult } | { stopped: true } | { error: string }

/** Longest a writer is held for a tail checkpoint; past it the write goes ahead and the WAL starts over later. */
const HOLD_LIMIT_MS = 1_000

export interface CheckpointerOptions {
  /** WAL frames past which the writer is held for a tail checkpoint. */
  limitFrames: number
  intervalMs?: number
  onError?: (msg: string) => void
}

export class Checkpointer {
  private readonly worker: Worker
  private resetDue = false
  private waiting: (() => void) | null = null
  private gone = false
  private stopping = false
  /**
   * Checkpoints that found the WAL past its limit, and tails checkpointed with the writer held (for tests and stats).
   */
  readonly stats = { oversized: 0, held: 0 }
  /**
   * Settles if the worker stops unexpectedly: every writer must then checkpoint some other way (SQLite's automatic
   * checkpoints), or the WAL grows without end.
   */
  readonly lost: Promise<void>
  private onLost!: () => void

  constructor(
    path: string,
    betterSqlite3Module: string,
    private readonly opts: CheckpointerOptions,
  ) {
    this.lost = new Promise((resolve) => (this.onLost = resolve))
    const onError = opts.onError ?? (() => {})
    this.worker = new Worker(WORKER, {
      eval: true,
      workerData: {
        path,
        module: betterSqlite3Module,
        intervalMs: opts.intervalMs ?? 200,
        limitFrames: opts.limitFrames,
      },
    })
    this.worker.on('message', (m: WorkerMessage) => {
      if ('error' in m) onError(m.error)
      else if ('report' in m) {
        if (m.report.log >= this.opts.limitFrames) {
          this.stats.oversized++
          this.resetDue = true
        }
      } else if ('now' in m) this.wake()
    })
    this.worker.on('error', (err) => onError(`checkpoint worker failed: ${String(err)}`))
    this.worker.once('exit', () => {
      this.gone = true
      this.wake()
      if (!this.stopping) this.onLost()
    })
    this.worker.unref()
  }

  private wake(): void {
    // Reports that arrived before this answer are older than it: the checkpoint just made supersedes them.
    this.resetDue = false
    const w = this.waiting
    if (!w) return
    this.waiting = null
    if (!this.gone && !this.stopping) this.worker.unref()
    w()
  }

  /** The last checkpoint found the WAL past its limit: the ledger's next writes wait for `beforeWrite`. */
  get tailDue(): boolean {
    return this.resetDue && !this.gone
  }

  /**
   * Called before the ledger's next group of writes (none of its writes under way). When the last checkpoint found the
   * WAL past its limit, the worker checkpoints the tail while the ledger (alone) holds its writes, so the next group
   * starts the WAL over (docs/architecture.md §15.18). At most once per checkpoint report.
   */
  async beforeWrite(): Promise<void> {
    if (!this.resetDue || this.gone) return
    this.resetDue = false
    this.stats.held++
    let timer: NodeJS.Timeout | undefined
    await new Promise<void>((resolve) => {
      this.waiting = resolve
      // Referenced while the writer waits on it: nothing else may be keeping the process alive.
      this.worker.ref()
      this.worker.postMessage('now')
      // A slow disk or a stalled worker must not stop every write: past the limit the write goes ahead.
      timer = setTimeout(() => this.wake(), HOLD_LIMIT_MS)
    })
    clearTimeout(timer)
  }

  /**
   * Stops the worker at once, without the last checkpoint `stop` makes: after a failed WAL sync the WAL's pages on
   * disk are not to be trusted, and copying them into the database would spread the damage.
   */
  async halt(): Promise<void> {
    if (this.gone) return
    this.stopping = true
    await this.worker.terminate()
  }

  async stop(): Promise<void> {
    if (this.gone) return
    this.stopping = true
    const stopped = new Promise<void>((resolve) => {
      const onMessage = (m: WorkerMessage) => {
        if (!('stopped' in m)) return
        this.worker.off('message', onMessage)
        resolve()
      }
      this.worker.on('message', onMessage)
      this.worker.once('exit', () => resolve())
    })
    // Kept alive while stopping: unref'd, the process could exit before the final checkpoint answered.
    this.worker.ref()
    this.worker.postMessage('stop')
    await stopped
    await this.worker.terminate()
  }
}
