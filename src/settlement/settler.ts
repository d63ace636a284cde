import { ulid } from '../ids/request-id.js'
import type { Store } from '../store/store.js'
import { SYSTEM_ACCOUNTS } from '../store/accounts.js'
import type { Blocked, Rail } from './rail.js'
import { commitReceipts } from '../receipts/commit.js'

export const SETTLER_LOCK = 'svc-settler'

export interface SettleReport {
  /** False when another settler held the lock. */
  ran: boolean
  batches: { id: string; total: bigint; legs: number; failedPayers: number[]; deferredPayers: number[] }[]
  /** Accounts whose charges the pass left waiting: the rail refuses them for now. */
  waiting: Blocked
  /** Batches whose outcome the rail could not tell: they stay open or sent, their charges owed, for a later pass. */
  unfinished: { id: string; why: string }[]
}

/**
 * Groups captured charges into batches and pays them on the rail; a batch is marked settled only after the rail
 * confirmed it. One settler runs at a time across processes (Postgres advisory lock).
 */
export class Settler {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<SettleReport> | undefined
  /** Told of each pass that ran (it held the lock), however it was started. */
  onPass: (report: SettleReport) => void = () => {}

  constructor(
    private readonly store: Store,
    private readonly rail: Rail,
    private readonly now: () => number = Date.now,
  ) {}

  /** One pass: finishes batches left open or sent by an earlier pass, then batches what is due. */
  async runOnce(): Promise<SettleReport> {
    this.running ??= this.pass()
      .then((report) => {
        if (report.ran) this.onPass(report)
        return report
      })
      .finally(() => (this.running = undefined))
    return this.running
  }

  private async pass(): Promise<SettleReport> {
    const lock = await this.store.tryLock(SETTLER_LOCK)
    if (!lock) return { ran: false, batches: [], waiting: { payers: [], payees: [] }, unfinished: [] }
    try {
      const fees = (await this.store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!.id
      const waiting = (await this.rail.blocked?.([
        ...new Set([...(await this.store.settlement.duePayees()), fees]),
      ])) ?? { payers: [], payees: [] }
      const report: SettleReport = { ran: true, batches: [], waiting, unfinished: [] }
      // A pass cut off while it built a batch left it building: it is whole as it is, and is sent with the others.
      await this.store.settlement.openBuilt()
      const pending = await this.store.settlement.batches(['open', 'sent'])
      const limits = { exclude: waiting, ...(this.rail.maxLegs === undefined ? {} : { maxLegs: this.rail.maxLegs }) }
      for (;;) {
        const batch = await this.store.settlement.createBatch({
          id: `bat_${ulid(this.now())}`,
          feeAccountId: fees,
          now: this.now(),
          limits,
        })
        if (!batch) break
        pending.push(batch)
      }
      for (const batch of pending) {
        const legs = await this.store.settlement.legs(batch.id)
        batch.receiptsRoot = await commitReceipts(this.store.receipts, this.rail.receiptDomain, batch.id)
        const executed = await this.rail.execute(batch, legs)
        // A batch whose outcome is unknown must not hold back those after it: each moves its own charges, and one
        // left open or sent keeps its charges owed (and its payees' pending) until a pass can tell.
        if (executed.kind === 'unknown') {
          report.unfinished.push({ id: batch.id, why: executed.why })
          continue
        }
        const { failedPayers, deferredPayers = [] } = executed
        await this.store.settlement.markSettled(batch.id, this.now(), failedPayers, deferredPayers)
        await this.rail.afterSettled?.(batch, legs)
        report.batches.push({ id: batch.id, total: batch.total, legs: legs.length, failedPayers, deferredPayers })
      }
      return report
    } finally {
      await lock.release()
    }
  }

  start(intervalMs: number, onError: (err: unknown) => void): void {
    if (intervalMs <= 0) return
    this.timer = setInterval(() => void this.runOnce().catch(onError), intervalMs)
    this.timer.unref()
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    await this.running?.catch(() => {})
  }
}
