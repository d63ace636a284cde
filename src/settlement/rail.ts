import type { X402Relay } from '../chain/x402-relay.js'
import type { TypedDataDomain } from 'viem'
import type { Batch, Leg } from '../store/settlement.js'
import { receiptDomain } from '../receipts/typed-data.js'

/** What a rail did with a batch. */
export type Executed =
  | {
      kind: 'moved'
      /** Their funds did not cover their transfers: their charges become debt. */
      failedPayers: number[]
      /**
       * Their transfers failed for a reason that is not their funds (a payee the token refuses): their charges wait, no
       * debt.
       */
      deferredPayers?: number[]
    }
  /**
   * It cannot tell whether or how the batch moved (the node forgot its outcome): the batch stays as it is for a later
   * pass.
   */
  | { kind: 'unknown'; why: string }

/** Accounts whose charges must wait for now: the rail cannot move money from these payers or to these payees. */
export interface Blocked {
  payers: number[]
  payees: number[]
}

/** Where batches of captured charges are paid: the ledger alone, or a chain. */
export interface Rail {
  readonly kind: 'local' | 'evm'
  /** The EIP-712 domain its receipts are signed in: the chain and settler contract, or the local rail's. */
  readonly receiptDomain: TypedDataDomain
  /** Most transfer legs one batch may carry (a chain transaction has a gas limit); unlimited when absent. */
  readonly maxLegs?: number
  /**
   * Moves the batch's legs (and, on a chain, records its `receiptsRoot` in the same transaction) and resolves once the
   * rail confirmed them, or with `unknown` when it cannot tell what became of them. Must be harmless to call again for
   * the same batch (a restart replays open and sent batches).
   */
  execute(batch: Batch, legs: Leg[]): Promise<Executed>
  /** Asked before each pass batches: which of the payees with due charges, and which payers, it cannot pay now. */
  blocked?(payees: number[]): Promise<Blocked>
  /** Called once the batch is marked settled in the store. */
  afterSettled?(batch: Batch, legs: Leg[]): Promise<void>
  /** Background work of the rail (the evm rail's chain watcher), started by a serving process. */
  start?(): Promise<void>
  /** Stops background work and abandons waits; a batch left sent is resumed by the next pass. */
  close?(): Promise<void>
  /** The gateway as its own x402 facilitator, when the rail takes payments per request (`rail.x402`). */
  readonly x402?: X402Relay
}

/** The local rail: the ledger is the rail; settling a batch only moves payees' pending to available. */
export class LocalRail implements Rail {
  readonly kind = 'local' as const
  readonly receiptDomain = receiptDomain()

  async execute(): Promise<Executed> {
    return { kind: 'moved', failedPayers: [] }
  }
}
