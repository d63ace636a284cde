import { Worker } from 'node:worker_threads'

/**
 * Runs SQLite WAL checkpoints on a worker thread with its own connection. Left to the writer, a checkpoint runs
 * inside whichever commit crosses the threshold: page copies and two fsyncs on the event loop. PASSIVE checkpoints
 * never block the writer; once one completes, the next write transaction starts the WAL over from its beginning.
 */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.module)
const db = new Database(workerData.path, { fileMustExist: true })
db.pragma('busy_timeout = 1000')
db.pragma('synchronous = NORMAL')
let busy = false
const run = () => {
  if (busy) return
  busy = true
  try { db.pragma('wal_checkpoint(PASSIVE)') } catch (err) { parentPort.postMessage({ error: String(err) }) }
  busy = false
}
const timer = setInterval(run, workerData.intervalMs)
parentPort.on('message', (m) => {
  if (m === 'stop') { clearInterval(timer); run(); db.close(); parentPort.postMessage('stopped') }
})
`

export class Checkpointer {
  private readonly worker: Worker

  constructor(path: string, betterSqlite3Module: string, intervalMs = 200, onError: (msg: string) => void = () => {}) {
    this.worker = new Worker(WORKER, { eval: true, workerData: { path, module: betterSqlite3Module, intervalMs } })
    this.worker.on('message', (m: unknown) => {
      if (typeof m === 'object' && m !== null && 'error' in m) onError(String((m as { error: string }).error))
    })
    this.worker.unref()
  }

  async stop(): Promise<void> {
    const stopped = new Promise<void>((resolve) => {
      this.worker.once('message', () => resolve())
      this.worker.once('exit', () => resolve())
    })
    // Kept alive while stopping: unref'd, the process could exit before the final checkpoint answered.
    this.worker.ref()
    this.worker.postMessage('stop')
    await stopped
    await this.worker.terminate()
  }
}
