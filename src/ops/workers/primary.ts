import cluster, { type Worker } from 'node:cluster'
import type { Logger } from 'pino'
import { forwardLines } from './lines.js'
import { isSvcMessage, Replies, WORKER_INDEX_ENV, type ToPrimary, type ToWorker } from './messages.js'

/** How long the primary waits for a worker's own readiness before it counts the worker unready. */
const LOCAL_ASK_MS = 2_000
/** A worker that dies sooner than this after it started is replaced after a growing pause (a crash at start). */
const QUICK_DEATH_MS = 10_000
const MAX_PAUSE_MS = 30_000

export interface WorkersOptions {
  count: number
  /** Environment variables every worker gets besides the primary's own. */
  env: Record<string, string>
  logger: Logger
  /** How long a worker may take to stop once told to (its own grace, then its settling), before it is killed. */
  stopMs: number
}

interface Slot {
  index: number
  worker?: Worker
  state: 'starting' | 'listening' | 'down'
  url?: string
  startedAt: number
  quickDeaths: number
  restart?: NodeJS.Timeout
}

/**
 * The primary of `svc serve --workers N` (node:cluster): it forks N workers that share the listening port, copies their
 * output to its own a whole line at a time, replaces a worker that dies (the replacement's start releases the dead
 * one's holds, as any instance's does for a dead process on its host), answers each worker's "is the server ready?"
 * from every worker's own answer, and stops them all on `close`.
 */
export class WorkerPool {
  private readonly slots: Slot[]
  private stopping = false
  private readonly replies = new Replies<string[]>()
  private startup: { resolve(url: string): void; reject(err: Error): void } | undefined
  private exited: (() => void) | undefined

  constructor(private readonly o: WorkersOptions) {
    this.slots = Array.from({ length: o.count }, (_, index) => ({
      index,
      state: 'down' as const,
      startedAt: 0,
      quickDeaths: 0,
    }))
    cluster.setupPrimary({ silent: true })
    cluster.on('exit', (worker, code, signal) => this.exit(worker, code, signal))
    cluster.on('message', (worker, m: unknown) => {
      if (isSvcMessage(m)) this.message(worker, m as ToPrimary)
    })
  }

  /** Starts every worker; resolves with the URL they listen at once all do, rejects if one exits before. */
  start(): Promise<string> {
    const listening = new Promise<string>((resolve, reject) => (this.startup = { resolve, reject }))
    for (const slot of this.slots) this.fork(slot)
    return listening
  }

  /** The process ids of the workers running now. */
  pids(): number[] {
    return this.slots.flatMap((s) => (s.worker?.process.pid ? [s.worker.process.pid] : []))
  }

  /** Tells every worker to stop (SIGTERM: each drains as a single process does) and waits until all have exited. */
  async close(): Promise<void> {
    this.stopping = true
    for (const s of this.slots) clearTimeout(s.restart)
    const live = this.slots.filter((s) => s.worker && !s.worker.isDead())
    if (live.length === 0) return
    const done = new Promise<void>((resolve) => (this.exited = resolve))
    for (const s of live) s.worker!.process.kill('SIGTERM')
    const kill = setTimeout(() => {
      for (const s of live) if (!s.worker!.isDead()) s.worker!.process.kill('SIGKILL')
    }, this.o.stopMs)
    await done
    clearTimeout(kill)
  }

  private fork(slot: Slot): void {
    const worker = cluster.fork({ ...this.o.env, [WORKER_INDEX_ENV]: String(slot.index) })
    Object.assign(slot, { worker, state: 'starting', url: undefined, startedAt: Date.now() })
    forwardLines(worker.process.stdout!, process.stdout)
    forwardLines(worker.process.stderr!, process.stderr)
  }

  private exit(worker: Worker, code: number | null, signal: string | null): void {
    const slot = this.slots.find((s) => s.worker === worker)
    if (!slot) return
    slot.state = 'down'
    const how = signal ? `killed by ${signal}` : `exited with code ${code}`
    if (this.stopping) {
      if (this.slots.every((s) => !s.worker || s.worker.isDead())) this.exited?.()
      return
    }
    if (this.startup) {
      const startup = this.startup
      this.startup = undefined
      void this.close().then(() => startup.reject(new Error(`worker ${slot.index} ${how} before it listened`)))
      return
    }
    slot.quickDeaths = Date.now() - slot.startedAt < QUICK_DEATH_MS ? slot.quickDeaths + 1 : 0
    const pause = slot.quickDeaths === 0 ? 0 : Math.min(MAX_PAUSE_MS, 500 * 2 ** (slot.quickDeaths - 1))
    this.o.logger.warn(
      { worker: slot.index, worker_pid: worker.process.pid, code, signal, restart_in_ms: pause },
      `worker ${slot.index} ${how}; another takes its place`,
    )
    slot.restart = setTimeout(() => this.fork(slot), pause)
  }

  private message(worker: Worker, m: ToPrimary): void {
    const slot = this.slots.find((s) => s.worker === worker)
    if (!slot) return
    if (m.type === 'svc:listening') {
      slot.state = 'listening'
      slot.url = m.url
      if (slot.quickDeaths > 0) this.o.logger.info({ worker: slot.index }, `worker ${slot.index} serves again`)
      if (this.startup && this.slots.every((s) => s.state === 'listening')) {
        this.startup.resolve(m.url)
        this.startup = undefined
      }
    } else if (m.type === 'svc:ready?') {
      void this.serverProblems().then((problems) => send(worker, { type: 'svc:ready', id: m.id, problems }))
    } else {
      this.replies.answer(m.id, m.problems)
    }
  }

  /** Every worker's problems, each named by its worker; a worker not listening, or not answering, is one. */
  private serverProblems(): Promise<string[]> {
    return Promise.all(
      this.slots.map(async (slot): Promise<string[]> => {
        if (slot.state !== 'listening' || !slot.worker)
          return [`worker ${slot.index}: ${slot.state === 'starting' ? 'starting' : 'not running'}`]
        const problems = await this.ask(slot.worker)
        return problems.map((p) => `worker ${slot.index}: ${p}`)
      }),
    ).then((all) => all.flat())
  }

  private ask(worker: Worker): Promise<string[]> {
    return this.replies.ask((id) => send(worker, { type: 'svc:local?', id }), LOCAL_ASK_MS, [
      `did not answer within ${LOCAL_ASK_MS} ms`,
    ])
  }
}

function send(worker: Worker, m: ToWorker): void {
  if (worker.isConnected()) worker.send(m)
}
