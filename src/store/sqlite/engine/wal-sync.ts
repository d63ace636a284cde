import { closeSync, fdatasync, fdatasyncSync, openSync } from 'node:fs'

/** How the WAL reaches the disk; tests inject theirs. */
export interface SyncWays {
  /** On libuv's pool: `fs.fdatasync`. */
  background: (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void
  /** On the calling thread, when the caller says nothing waits behind it: `fs.fdatasyncSync` (null: never). */
  inline: ((fd: number) => void) | null
}

const DISK: SyncWays = { background: fdatasync, inline: fdatasyncSync }

interface Waiter {
  resolve: () => void
  reject: (err: unknown) => void
}

/**
 * Makes committed WAL frames durable: one `fdatasync` at a time on libuv's pool (on the event loop when nothing else
 * waits: `durable`), each covering every commit made before it began. A failed sync is final: all waiting and all after
 * is refused until a restart; `on.failed` stops the store's other writers (docs/architecture.md §15.19).
 */
export class WalSync {
  /** Opened at once: a WAL that cannot be opened is a start-up error, not a disk failure found by the first charge. */
  private readonly fd: number
  /** Committed, waiting for the next sync to begin. */
  private next: Waiter[] = []
  private running = false
  private closed = false
  private idle: (() => void)[] = []
  failure: Error | undefined

  constructor(
    walPath: string,
    private readonly on: {
      /** A sync ended: what waited for it to commit can commit now. */
      synced: () => void
      /** The first sync failed: called once, before anything waiting is refused. */
      failed: (failure: Error) => void
    },
    private readonly ways: SyncWays = DISK,
  ) {
    this.fd = openSync(walPath, 'r')
  }

  /** A sync is on the disk now: what commits meanwhile waits for the next one. */
  get syncing(): boolean {
    return this.running
  }

  /**
   * Resolves once everything committed before this call is on disk. `alone`: the caller expects nothing else to need
   * the event loop meanwhile, so a sync on it (when none is under way) delays no one and spares the two thread
   * wake-ups of a sync on the pool.
   */
  durable(alone = false): Promise<void> {
    if (this.failure) return Promise.reject(this.failure)
    if (this.closed) return Promise.reject(new Error('the store is closed'))
    return new Promise((resolve, reject) => {
      this.next.push({ resolve, reject })
      if (!this.running) this.start(alone)
    })
  }

  private start(alone = false): void {
    const covered = this.next
    this.next = []
    this.running = true
    const inline = alone ? this.ways.inline : null
    let failed: NodeJS.ErrnoException | null = null
    try {
      if (inline) inline(this.fd)
      else this.ways.background(this.fd, (err) => this.ended(covered, err))
    } catch (err) {
      failed = err instanceof Error ? err : new Error(`the WAL sync failed: ${String(err)}`)
    }
    if (inline || failed) this.ended(covered, failed)
  }

  private ended(covered: Waiter[], err: NodeJS.ErrnoException | null): void {
    this.running = false
    if (err && !this.failure) {
      this.failure = new Error(
        `the ledger cannot write to disk (${err.message}); nothing more is written until the gateway restarts on a sound disk`,
      )
      this.on.failed(this.failure)
    }
    let again = false
    if (this.failure) {
      for (const w of [...covered, ...this.next.splice(0)]) w.reject(this.failure)
    } else {
      for (const w of covered) w.resolve()
      again = this.next.length > 0
      if (again) this.start()
    }
    if (!again) for (const done of this.idle.splice(0)) done()
    this.on.synced()
  }

  /** Waits for the sync under way (if any), then lets go of the WAL. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    if (this.running) await new Promise<void>((resolve) => this.idle.push(resolve))
    closeSync(this.fd)
  }
}
