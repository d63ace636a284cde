import pg from 'pg'
import { recordRow, type Close, type HoldRequest } from '../ledger/types.js'

/** How a close went: 1 closed, 0 released first by a sweep (its row written as swept), -1 closed already. */
export type Closed = 1 | 0 | -1

/** The statements of one operation, which a group falls back to when the server refuses the group. */
export interface Singles {
  hold(h: HoldRequest): Promise<boolean>
  close(h: HoldRequest, c: Close): Promise<Closed>
}

type Op =
  | { kind: 'hold'; h: HoldRequest; resolve: (ok: boolean) => void; reject: (e: unknown) => void }
  | { kind: 'close'; h: HoldRequest; c: Close; resolve: (r: Closed) => void; reject: (e: unknown) => void }

const GROUP = `SELECT r_closed AS closed, r_held AS held FROM svc_ledger_group($1::text, $2::bigint[], $3::bigint[], $4::bigint[],
  $5::json, $6::bigint[], $7::bigint[])`

/** A request's row as `svc_ledger_group` reads it: an object of its columns, integers past 2^53 as strings. */
export function rowJson(row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).map(([c, v]) => [c, typeof v === 'bigint' ? String(v) : v]))
}

/**
 * The group commit of the Postgres hot ledger: the holds and closes a process asks for while earlier groups run go
 * together in ONE call of `svc_ledger_group` (migration 018), one round trip and one transaction, each with the
 * conditional writes of its statement of one. At most `maxRunning` groups run at once (one: groups grow with the load
 * instead). A lone operation takes its statement of one. A group the server refuses (an error of the database: a dead
 * counter's CHECK, a deadlock) did not commit: each of its operations runs again alone, so one operation's failure is
 * its own. A group whose answer was lost fails each of its operations with the error: they may have committed
 * (docs/architecture.md §15.36).
 */
export class LedgerGroups {
  private queue: Op[] = []
  private running = 0
  private scheduled = false
  /** Operations asked for and not yet answered, and who waits for there to be none. */
  private unsettled = 0
  private idle: (() => void)[] = []

  constructor(
    private readonly pool: pg.Pool,
    private readonly singles: Singles,
    private readonly committed: (ops: number, ms: number) => void,
    private readonly limits = { maxRunning: 1, maxGroup: 256 },
  ) {}

  hold(h: HoldRequest): Promise<boolean> {
    return this.settled(new Promise((resolve, reject) => this.enqueue({ kind: 'hold', h, resolve, reject })))
  }

  close(h: HoldRequest, c: Close): Promise<Closed> {
    return this.settled(new Promise((resolve, reject) => this.enqueue({ kind: 'close', h, c, resolve, reject })))
  }

  /** Resolves once every operation asked for has been answered. */
  async drained(): Promise<void> {
    if (this.unsettled > 0) await new Promise<void>((resolve) => this.idle.push(resolve))
  }

  /** Counts an operation run outside the groups (a statement of its own) among those `drained` waits for. */
  settled<T>(answer: Promise<T>): Promise<T> {
    this.unsettled++
    return answer.finally(() => {
      if (--this.unsettled === 0) for (const done of this.idle.splice(0)) done()
    })
  }

  private enqueue(op: Op): void {
    this.queue.push(op)
    this.schedule()
  }

  private schedule(): void {
    if (this.scheduled || this.running >= this.limits.maxRunning || this.queue.length === 0) return
    this.scheduled = true
    setImmediate(this.flush)
  }

  /** Runs the queue's first owner's operations (an instance has one owner but when it registered again) as a group. */
  private readonly flush = (): void => {
    this.scheduled = false
    const owner = this.queue[0]!.h.owner
    const group: Op[] = []
    const rest: Op[] = []
    for (const op of this.queue) (op.h.owner === owner && group.length < this.limits.maxGroup ? group : rest).push(op)
    this.queue = rest
    this.running++
    void this.run(group).finally(() => {
      this.running--
      this.schedule()
    })
    this.schedule()
  }

  private async run(group: Op[]): Promise<void> {
    if (group.length === 1) return this.alone(group[0]!)
    const closes = group.filter((o) => o.kind === 'close')
    const holds = group.filter((o) => o.kind === 'hold')
    const startedAt = performance.now()
    let r: pg.QueryResult<{ closed: number[]; held: boolean[] }>
    try {
      r = await this.pool.query({ name: 'svc_ledger_group', text: GROUP, values: groupValues(closes, holds) })
    } catch (err) {
      if (refused(err)) return void (await Promise.all(group.map((op) => this.alone(op))))
      for (const op of group) op.reject(err)
      return
    }
    const { closed, held } = r.rows[0]!
    closes.forEach((op, i) => op.resolve(closed[i] as Closed))
    holds.forEach((op, i) => op.resolve(held[i]!))
    try {
      this.committed(group.length, performance.now() - startedAt)
    } catch {
      // An observer's failure (metrics) is not the group's: its operations are answered.
    }
  }

  /** One operation through its statement of one. */
  private async alone(op: Op): Promise<void> {
    try {
      if (op.kind === 'hold') op.resolve(await this.singles.hold(op.h))
      else op.resolve(await this.singles.close(op.h, op.c))
    } catch (err) {
      op.reject(err)
    }
  }
}

/**
 * Whether the server refused the group, so that it did not commit: an error of the database's own, but not the end
 * of the session (an administrator's termination, a shutdown: class 57P, or any FATAL), which may come after a commit.
 */
function refused(err: unknown): boolean {
  return err instanceof pg.DatabaseError && err.severity !== 'FATAL' && !err.code?.startsWith('57P')
}

type Closing = Extract<Op, { kind: 'close' }>
type Holding = Extract<Op, { kind: 'hold' }>

function groupValues(closes: Closing[], holds: Holding[]): unknown[] {
  const ids = (ops: Op[]) => ops.map((o) => String(o.h.accountId))
  return [
    (closes[0] ?? holds[0])!.h.owner,
    ids(closes),
    closes.map((o) => String(o.h.amount)),
    closes.map((o) => String(o.c.cost)),
    JSON.stringify(closes.map((o) => rowJson(recordRow(o.h, o.c)))),
    ids(holds),
    holds.map((o) => String(o.h.amount)),
  ]
}
