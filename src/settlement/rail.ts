import type { Batch, Leg } from '../store/settlement.js'

/** Where batches of captured charges are paid: the ledger alone, or a chain. */
export interface Rail {
  readonly kind: 'local' | 'evm'
  /**
   * Moves the batch's legs and resolves once the rail confirmed them. Must be harmless to call again for the
   * same batch (a restart replays open and sent batches).
   */
  execute(batch: Batch, legs: Leg[]): Promise<void>
}

/** The local rail: the ledger is the rail; settling a batch only moves payees' pending to available. */
export class LocalRail implements Rail {
  readonly kind = 'local' as const

  async execute(): Promise<void> {}
}
