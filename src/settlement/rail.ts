import type { Batch, Leg } from '../store/settlement.js'

/** What a rail did with a batch: payers whose transfers it could not make (their charges become debt). */
export interface Executed {
  failedPayers: number[]
}

/** Where batches of captured charges are paid: the ledger alone, or a chain. */
export interface Rail {
  readonly kind: 'local' | 'evm'
  /** Most transfer legs one batch may carry (a chain transaction has a gas limit); unlimited when absent. */
  readonly maxLegs?: number
  /**
   * Moves the batch's legs and resolves once the rail confirmed them. Must be harmless to call again for the
   * same batch (a restart replays open and sent batches).
   */
  execute(batch: Batch, legs: Leg[]): Promise<Executed>
  /** Called once the batch is marked settled in the store. */
  afterSettled?(batch: Batch, legs: Leg[]): Promise<void>
  /** Background work of the rail (the evm rail's chain watcher), started by a serving process. */
  start?(): Promise<void>
  /** Stops background work and abandons waits; a batch left sent is resumed by the next pass. */
  close?(): Promise<void>
}

/** The local rail: the ledger is the rail; settling a batch only moves payees' pending to available. */
export class LocalRail implements Rail {
  readonly kind = 'local' as const

  async execute(): Promise<Executed> {
    return { failedPayers: [] }
  }
}
