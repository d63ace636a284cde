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
 * Makes committed WAL frames durable: one `fdatasync` of the WAL at a time, on libuv's pool, so the event loop goes on
 * serving while the disk flushes (or on the event loop itself when nothing else waits for it: `durable`). A commit
 * asks for durability after it returned; the first sync that begins after that covers it, and one sync covers every
 * commit made before it began (group commit without holding anything back).
 *
 * A failed sync is final: Linux may drop the pages it could not write and let a later sync succeed, and the WAL's
 * checksum chain would then discard every later frame on recovery, acknowledged ones included. Everything waiting
 * is refused and so is everything after (`failure`), until the gateway restarts on a sound disk; `on.failed` lets
 * the owner stop the store's other writers.
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
    if (this.failure) {
      for (const w of [...covered, ...this.next.splice(0)]) w.reject(this.failure)
    } else {
      for (const w of covered) w.resolve()
      if (this.next.length > 0) this.start()
    }
    if (!this.running) for (const done of this.idle.splice(0)) done()
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
