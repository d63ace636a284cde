import { sql, type Kysely, type Transaction } from 'kysely'
import type { Database, X402PaymentStatus } from './schema.js'
import { postFromWorld } from './accounts.js'
import { MAX_STORED } from './chain.js'
import { big, num } from './ints.js'
import type { Leg } from './batch-types.js'

/** The prepaid account of a wallet that pays with x402 (docs/architecture.md §4a). */
export const prepaidAddress = (wallet: string) => `x402:${wallet}`

/** The wallet of a prepaid account's address; undefined for any other account. */
export function walletOfPrepaid(address: string): string | undefined {
  return address.startsWith('x402:') ? address.slice(5) : undefined
}

/**
 * How long a credited payment's request may take to be admitted before what it paid counts as free to refund: longer
 * than any admission (a crash between the credit and the hold leaves the payment credited; its funds go back).
 */
export const ADMISSION_GRACE_MS = 60_000

export interface X402Payment {
  payer: string
  nonce: string
  requestId: string
  amount: bigint
  validBefore: number
  status: X402PaymentStatus
  accountId: number | null
  txHash: string | null
  note: string | null
  createdAt: number
  updatedAt: number
}

/** x402 payments: each claimed once by payer and nonce, credited to the payer's prepaid account once it arrived. */
export class X402Repo {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Claims a payment for a request before its transfer is sent: false when its payer and nonce were claimed already
   * (a replay, or the same payment at another gateway), which then serves no second request.
   */
  async claim(p: {
    payer: string
    nonce: string
    requestId: string
    amount: bigint
    validBefore: number
    now: number
  }): Promise<boolean> {
    const r = await this.db
      .insertInto('x402_payments')
      .values({
        payer: p.payer,
        nonce: p.nonce.toLowerCase(),
        request_id: p.requestId,
        amount: p.amount,
        valid_before: BigInt(p.validBefore),
        status: 'claimed',
        created_at: BigInt(p.now),
        updated_at: BigInt(p.now),
      })
      .onConflict((oc) => oc.columns(['payer', 'nonce']).doNothing())
      .returning('payer')
      .executeTakeFirst()
    return r !== undefined
  }

  /**
   * The payment's transfer was mined: in one transaction its amount is credited to the payer's prepaid account
   * (created the first time, with no cap: its balance is what it paid) with an `x402` posting, and the payment marked
   * credited. The account's id; null when the payment was not claimed and uncredited (it is credited once).
   */
  async credit(payer: string, nonce: string, txHash: string, now: number): Promise<number | null> {
    return this.db.transaction().execute(async (trx) => {
      const address = prepaidAddress(payer)
      await trx
        .insertInto('accounts')
        .values({
          address,
          kind: 'prepaid',
          status: 'active',
          balance: 0n,
          held: 0n,
          cap: MAX_STORED,
          debt: 0n,
          created_at: BigInt(now),
        })
        .onConflict((oc) => oc.column('address').doNothing())
        .execute()
      const account = await trx
        .selectFrom('accounts')
        .select('id')
        .where('address', '=', address)
        .executeTakeFirstOrThrow()
      const accountId = num(account.id)
      const payment = await trx
        .updateTable('x402_payments')
        .set({ status: 'credited', account_id: accountId, tx_hash: txHash, updated_at: BigInt(now) })
        .where('payer', '=', payer)
        .where('nonce', '=', nonce.toLowerCase())
        .where('status', '=', 'claimed')
        .returning(['amount', 'request_id'])
        .executeTakeFirst()
      if (!payment) return null
      const amount = big(payment.amount)
      await postFromWorld(trx, { ref: payment.request_id, accountId, kind: 'x402', amount, now })
      await trx
        .updateTable('accounts')
        .set({ balance: sql`balance + ${amount}` })
        .where('id', '=', accountId)
        .execute()
      return accountId
    })
  }

  /** The payment's request was admitted or refused: what its hold leaves (or all of it) is free to refund. */
  async settled(payer: string, nonce: string, now: number): Promise<void> {
    await this.mark({ payer, nonce }, ['credited'], { status: 'settled', now })
  }

  /** The payment's transfer did not happen (refused, reverted, expired unsent): it moved nothing. */
  async failed(payer: string, nonce: string, note: string, now: number): Promise<void> {
    await this.mark({ payer, nonce }, ['claimed'], { status: 'failed', now, note })
  }

  /** Claimed payments not updated after `before`: transfers a crash or a lost answer left undecided. */
  async undecided(before: number): Promise<X402Payment[]> {
    const rows = await this.db
      .selectFrom('x402_payments')
      .selectAll()
      .where('status', '=', 'claimed')
      .where('updated_at', '<=', BigInt(before))
      .orderBy('updated_at')
      .limit(100)
      .execute()
    return rows.map(toPayment)
  }

  async payment(payer: string, nonce: string): Promise<X402Payment | undefined> {
    const r = await this.db
      .selectFrom('x402_payments')
      .selectAll()
      .where('payer', '=', payer)
      .where('nonce', '=', nonce.toLowerCase())
      .executeTakeFirst()
    return r && toPayment(r)
  }

  /** A payer's payments, newest first. */
  async payments(payer: string, limit = 100): Promise<X402Payment[]> {
    const rows = await this.db
      .selectFrom('x402_payments')
      .selectAll()
      .where('payer', '=', payer)
      .orderBy('created_at', 'desc')
      .limit(limit)
      .execute()
    return rows.map(toPayment)
  }

  private async mark(
    { payer, nonce }: { payer: string; nonce: string },
    from: X402PaymentStatus[],
    to: { status: X402PaymentStatus; now: number; note?: string },
  ): Promise<void> {
    await this.db
      .updateTable('x402_payments')
      .set({ status: to.status, updated_at: BigInt(to.now), ...(to.note !== undefined ? { note: to.note } : {}) })
      .where('payer', '=', payer)
      .where('nonce', '=', nonce.toLowerCase())
      .where('status', 'in', from)
      .execute()
  }
}

/** Most prepaid accounts refunded by one batch. */
export const REFUNDS_PER_BATCH = 100

/**
 * The refunds a batch takes, in the batch's transaction: each prepaid account's funds that no open hold reserves and
 * no payment still being admitted awaits (`ADMISSION_GRACE_MS`) go back to its wallet. Each is taken out of the account
 * with an `x402_refund` posting by a conditional update (a hold taken meanwhile is never refunded), and paid by the
 * batch as a leg from the account to itself: the settlement contract pays the wallet from what it was paid in advance.
 */
export async function takeRefunds(
  trx: Transaction<Database>,
  { ref, now, max }: { ref: string; now: number; max: number },
): Promise<Leg[]> {
  if (max <= 0) return []
  const since = BigInt(now - ADMISSION_GRACE_MS)
  const rows = await trx
    .selectFrom('accounts')
    .select([
      'id',
      'balance',
      'held',
      sql<bigint>`(SELECT coalesce(sum(p.amount), 0) FROM x402_payments p
        WHERE p.account_id = accounts.id AND p.status = 'credited' AND p.updated_at > ${since})`.as('awaiting'),
    ])
    .where('kind', '=', 'prepaid')
    .where(sql<boolean>`balance > held`)
    .orderBy('id')
    .limit(max)
    .execute()
  const legs: Leg[] = []
  for (const r of rows) {
    const reserved = big(r.held) + big(r.awaiting)
    const amount = big(r.balance) - reserved
    if (amount <= 0n) continue
    const accountId = num(r.id)
    const taken = await trx
      .updateTable('accounts')
      .set({ balance: sql`balance - ${amount}` })
      .where('id', '=', accountId)
      .where(sql<boolean>`balance - held >= ${amount + big(r.awaiting)}`)
      .returning('id')
      .executeTakeFirst()
    if (!taken) continue
    await postFromWorld(trx, { ref, accountId, kind: 'x402_refund', amount: -amount, now })
    legs.push({ payerId: accountId, payeeId: accountId, amount })
  }
  return legs
}

/**
 * A batch's refund legs its payer could not pay (the contract reported it failed): the funds stay in the contract, so
 * each is credited back to its prepaid account, and refunded by a later batch.
 */
export async function restoreRefunds(
  trx: Transaction<Database>,
  { ref, legs, now }: { ref: string; legs: Leg[]; now: number },
): Promise<void> {
  for (const l of legs) {
    await postFromWorld(trx, { ref, accountId: l.payerId, kind: 'x402_refund', amount: l.amount, now })
    await trx
      .updateTable('accounts')
      .set({ balance: sql`balance + ${l.amount}` })
      .where('id', '=', l.payerId)
      .execute()
  }
}

function toPayment(r: {
  payer: string
  nonce: string
  request_id: string
  amount: bigint | number
  valid_before: bigint | number
  status: X402PaymentStatus
  account_id: number | bigint | null
  tx_hash: string | null
  note: string | null
  created_at: bigint | number
  updated_at: bigint | number
}): X402Payment {
  return {
    payer: r.payer,
    nonce: r.nonce,
    requestId: r.request_id,
    amount: big(r.amount),
    validBefore: num(r.valid_before),
    status: r.status,
    accountId: r.account_id === null ? null : num(r.account_id),
    txHash: r.tx_hash,
    note: r.note,
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
  }
}
