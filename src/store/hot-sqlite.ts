import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { QueuedLedger, sqliteLedgerOps, type LedgerOp, type Outcome } from './sqlite-ledger-ops.js'

interface Pending {
  op: LedgerOp
  resolve: (v: never) => void
  reject: (e: unknown) => void
}

/**
 * The hot ledger of an in-memory SQLite database, which no other thread can open: the same grouped statements as
 * the ledger thread, run on the event loop. Operations of one turn form one group, under Kysely's connection mutex
 * (never inside a Kysely transaction on the same connection). Nothing to sync: the database is not on disk.
 */
export class SqliteHotLedger extends QueuedLedger {
  private readonly ledger
  private queue: Pending[] = []
  /** Groups scheduled or running. */
  private flushes = 0

  constructor(raw: BetterSqlite3.Database, private readonly db: Kysely<Database>) {
    super()
    this.ledger = sqliteLedgerOps(raw)
  }

  async close(): Promise<void> {
    while (this.flushes > 0) await new Promise((resolve) => setTimeout(resolve, 2))
  }

  /** Queues an operation for the next group; settles once the group committed. */
  protected enqueue<T>(op: LedgerOp): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.queue.length === 0) {
        this.flushes++
        setImmediate(() => void this.flush().finally(() => this.flushes--))
      }
      this.queue.push({ op, resolve: resolve as (v: never) => void, reject })
    })
  }

  private async flush(): Promise<void> {
    const pending = this.queue
    this.queue = []
    let outcomes: Outcome[]
    try {
      outcomes = await this.db.connection().execute(async () => this.ledger.runGroup(pending.map((p) => p.op)))
    } catch (err) {
      for (const p of pending) p.reject(err)
      return
    }
    pending.forEach((p, i) => {
      const o = outcomes[i]!
      if (o.ok) p.resolve(o.value as never)
      else p.reject(o.error)
    })
  }
}
