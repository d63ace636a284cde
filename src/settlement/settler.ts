import { ulid } from '../api/request-id.js'
import type { Store } from '../store/store.js'
import { SYSTEM_ACCOUNTS } from '../store/accounts.js'
import type { Rail } from './rail.js'

export const SETTLER_LOCK = 'svc-settler'

export interface SettleReport {
  /** False when another settler held the lock. */
  ran: boolean
  batches: { id: string; total: bigint; legs: number; failedPayers: number[] }[]
}

/**
 * Groups captured charges into batches and pays them on the rail; a batch is marked settled only after the rail
 * confirmed it. One settler runs at a time across processes (Postgres advisory lock).
 */
export class Settler {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<SettleReport> | undefined

  constructor(private readonly store: Store, private readonly rail: Rail, private readonly now: () => number = Date.now) {}

  /** One pass: finishes batches left open or sent by an earlier pass, then batches what is due. */
  async runOnce(): Promise<SettleReport> {
    this.running ??= this.pass().finally(() => (this.running = undefined))
    return this.running
  }

  private async pass(): Promise<SettleReport> {
    const lock = await this.store.tryLock(SETTLER_LOCK)
    if (!lock) return { ran: false, batches: [] }
    try {
      const fees = (await this.store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!.id
      const report: SettleReport = { ran: true, batches: [] }
      const pending = await this.store.settlement.batches(['open', 'sent'])
      for (;;) {
        const batch = await this.store.settlement.createBatch(`bat_${ulid(this.now())}`, fees, this.now(), this.rail.maxLegs === undefined ? {} : { maxLegs: this.rail.maxLegs })
        if (!batch) break
        pending.push(batch)
      }
      for (const batch of pending) {
        const legs = await this.store.settlement.legs(batch.id)
        const { failedPayers } = await this.rail.execute(batch, legs)
        await this.store.settlement.markSettled(batch.id, this.now(), failedPayers)
        await this.rail.afterSettled?.(batch, legs)
        report.batches.push({ id: batch.id, total: batch.total, legs: legs.length, failedPayers })
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
