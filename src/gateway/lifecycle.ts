import { randomBytes } from 'node:crypto'
import { readFileSync, readlinkSync } from 'node:fs'
import { hostname } from 'node:os'
import type { Store } from '../store/store.js'
import type { InFlight, Instance } from '../store/instances.js'
import { minuteOf } from '../limits/counter.js'

const HEARTBEAT_MS = 2_000
const STALE_MS = 15_000
const SWEEP_MS = 5_000

/**
 * Where this process's pids mean something: the machine's boot (two machines, or clones of one image, may share a
 * host name; the pid namespace of a process outside containers is the same on every Linux machine) and the kernel's
 * pid namespace (two containers that share a host name).
 */
export function hostIdentity(): string {
  const read = (path: string, how: (p: string) => string) => {
    try {
      return how(path).trim()
    } catch {
      return ''
    }
  }
  return [
    hostname(),
    read('/proc/sys/kernel/random/boot_id', (p) => readFileSync(p, 'utf8')),
    read('/proc/self/ns/pid', readlinkSync),
  ]
    .filter(Boolean)
    .join('/')
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Which registered instances are gone, by this instance's clock: a peer whose heartbeat value has not changed for
 * STALE_MS since this instance first saw it, or a dead (or reused) process id on this host (docs/architecture.md
 * §15.26). A peer on another host that died before this instance started is found STALE_MS after it starts.
 */
export class HeartbeatWatch {
  /** Each peer's last heartbeat value, and when (by this clock) it was first seen. */
  private readonly seen = new Map<string, { heartbeatAt: number; since: number }>()

  dead(all: Instance[], self: { id: string; host: string; pid: number }, now: number): string[] {
    const listed = new Set(all.map((i) => i.id))
    for (const id of this.seen.keys()) if (!listed.has(id)) this.seen.delete(id)
    return all
      .filter((i) => i.id !== self.id)
      .filter((i) => {
        let seen = this.seen.get(i.id)
        if (seen?.heartbeatAt !== i.heartbeatAt)
          this.seen.set(i.id, (seen = { heartbeatAt: i.heartbeatAt, since: now }))
        return now - seen.since > STALE_MS || (i.host === self.host && (i.pid === self.pid || !pidAlive(i.pid)))
      })
      .map((i) => i.id)
  }
}

/** A gateway instance's id: the owner of its holds in the store. */
export function newInstanceId(): string {
  return `gw_${randomBytes(8).toString('hex')}`
}

export interface LifecycleOptions {
  store: Store
  /** The owner of this instance's holds. */
  id: string
  holdTtlMs: number
  now: () => number
  onError: (err: unknown) => void
  /** Told how many holds a sweep released (expired, or of instances that stopped or died), and if at start. */
  onReleased?: (count: number, atStart: boolean) => void
}

/**
 * The gateway's presence in the store: registers, heartbeats, extends the leases of its requests' holds while it serves
 * them, releases the holds of dead instances (a restart after kill -9 frees them at once) and any hold past its expiry.
 * A hold its request left open (its release failed with the store) is no longer extended: it expires and is swept.
 */
export class InstanceLifecycle {
  readonly host = hostIdentity()
  private timers: NodeJS.Timeout[] = []
  /** Requests admitted whose holds are not yet closed: the holds whose leases the heartbeat extends. */
  private readonly serving = new Map<string, InFlight>()
  /** The requests being served whose row the heartbeat wrote (`requests_in_flight`). */
  private readonly written = new Set<string>()
  private readonly peers = new HeartbeatWatch()

  /** The owner of this instance's holds; a new one when peers took the instance for dead. */
  id: string
  private readonly store: Store
  private readonly holdTtlMs: number
  private readonly now: () => number
  private readonly onError: (err: unknown) => void
  private readonly onReleased: (count: number, atStart: boolean) => void

  constructor(o: LifecycleOptions) {
    this.store = o.store
    this.id = o.id
    this.holdTtlMs = o.holdTtlMs
    this.now = o.now
    this.onError = o.onError
    this.onReleased = o.onReleased ?? (() => {})
  }

  async start(): Promise<void> {
    await this.store.instances.register({ id: this.id, host: this.host, pid: process.pid, startedAt: this.now() })
    const released = await this.sweep()
    if (released > 0) this.onReleased(released, true)
    this.every(HEARTBEAT_MS, () => this.heartbeat())
    this.every(SWEEP_MS, async () => {
      const swept = await this.sweep()
      if (swept > 0) this.onReleased(swept, false)
    })
  }

  /** Tells peers this instance lives, and extends the leases of the holds of the requests it is serving. */
  async heartbeat(): Promise<void> {
    const now = this.now()
    // Removed by a peer that took a long pause for death, after it released this instance's holds and marked its
    // counters dead: register again under a new id (the old one can never hold again), or a later death would go
    // unnoticed. The holds admitted under the old id find nothing held when they close: their requests go uncharged.
    if (!(await this.store.instances.heartbeat(this.id, now))) {
      // Registered before any hold takes it: a sweep releases the counters of owners that are not registered.
      const id = newInstanceId()
      await this.store.instances.register({ id, host: this.host, pid: process.pid, startedAt: now })
      this.id = id
    }
    await this.store.ledger.extendLeases(this.serving.keys(), now + this.holdTtlMs)
    await this.syncInFlight()
  }

  /** Writes the requests served since the last heartbeat, and deletes the rows of those that ended. */
  private async syncInFlight(): Promise<void> {
    const added = [...this.serving.values()].filter((r) => !this.written.has(r.requestId))
    const ended = [...this.written].filter((id) => !this.serving.has(id))
    if (added.length === 0 && ended.length === 0) return
    await this.store.inFlight.sync(this.id, added, ended)
    for (const r of added) this.written.add(r.requestId)
    for (const id of ended) this.written.delete(id)
  }

  /** The ids of the requests being served now. */
  servingIds(): string[] {
    return [...this.serving.keys()]
  }

  /** Requests being served now. */
  get inFlight(): number {
    return this.serving.size
  }

  /** Resolves once no request is being served, or after `withinMs`: whether none is. */
  async drained(withinMs: number): Promise<boolean> {
    const until = Date.now() + withinMs
    while (this.serving.size > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10))
    return this.serving.size === 0
  }

  /** A request holds money until `released`: its hold's lease is extended meanwhile. */
  admitted(request: InFlight): void {
    this.serving.set(request.requestId, request)
  }

  /** The request's hold was captured or released, or its release was tried and failed: its lease runs out. */
  released(requestId: string): void {
    this.serving.delete(requestId)
  }

  /** Releases expired holds and the holds of dead instances; returns how many were released. */
  async sweep(): Promise<number> {
    const now = this.now()
    const dead = this.peers.dead(
      await this.store.instances.list(),
      { id: this.id, host: this.host, pid: process.pid },
      now,
    )
    let released = await this.store.ledger.releaseOwnedBy(dead, now)
    await this.store.instances.remove(dead)
    // Instances that stopped with holds open, or that a sweep removed before it could release them.
    released += await this.store.ledger.releaseUnregistered(now)
    released += await this.store.ledger.releaseExpired(now)
    // The requests of those instances that were in flight keep a usage record (`cut_off`).
    await this.store.inFlight.cutOffUnregistered(now)
    await this.store.idempotency.prune(now)
    await this.store.keptResponses.prune(now)
    await this.store.keyRates.prune(minuteOf(now) - 1)
    return released
  }

  private every(ms: number, fn: () => Promise<unknown>): void {
    let running = false
    const t = setInterval(() => {
      if (running) return
      running = true
      fn()
        .catch(this.onError)
        .finally(() => (running = false))
    }, ms)
    t.unref()
    this.timers.push(t)
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t)
    this.timers = []
    await this.syncInFlight().catch(this.onError)
    await this.store.instances.remove([this.id])
    // Requests have ended: what is still held is holds whose close failed. Returned now, not at a peer's next sweep.
    await this.store.ledger.retire(this.id, this.now())
    await this.store.inFlight.cutOffUnregistered(this.now())
  }
}
