import { walletOfPrepaid } from './x402.js'
import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { big, bigOrNull, num, numOrNull } from './ints.js'

/** What a request's receipt states, as its row and its payer's account hold it. */
export interface ReceiptRecord {
  requestId: string
  keyId: string
  payer: string
  model: string
  servedModel: string | null
  provider: string | null
  bodySha256: string | null
  promptTokens: number
  completionTokens: number
  upstreamPromptTokens: number | null
  upstreamCompletionTokens: number | null
  inputPrice: bigint
  outputPrice: bigint
  cost: bigint
  fee: bigint
  outcome: string
  createdAt: number
}

/** Where a charge was settled: its batch, the batch's receipts root and leaves, and its transaction. */
export interface SettledIn {
  batchId: string
  status: string
  root: string | null
  txHash: string | null
  block: bigint | null
  /** The leaves of the root, in order, with their request ids. */
  leaves: { requestId: string; leaf: string }[]
}

/** Receipts' records, and the roots settlement batches commit to. */
export class ReceiptsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  private records() {
    return this.db
      .selectFrom('holds')
      .innerJoin('accounts', 'accounts.id', 'holds.account_id')
      .select([
        'holds.request_id',
        'holds.key_id',
        'accounts.address',
        'holds.model',
        'holds.served_model',
        'holds.provider',
        'holds.body_sha256',
        'holds.prompt_tokens',
        'holds.completion_tokens',
        'holds.upstream_prompt_tokens',
        'holds.upstream_completion_tokens',
        'holds.input_price',
        'holds.output_price',
        'holds.cost',
        'holds.fee',
        'holds.outcome',
        'holds.created_at',
      ])
      .where('holds.outcome', 'is not', null)
  }

  /** The receipt record of one of the account's requests. */
  async record(accountId: number, requestId: string): Promise<ReceiptRecord | undefined> {
    const r = await this.records()
      .where('holds.request_id', '=', requestId)
      .where('holds.account_id', '=', accountId)
      .executeTakeFirst()
    return r && toRecord(r)
  }

  /** The records of the charges a batch carries now, by request id. */
  async ofBatch(batchId: string): Promise<ReceiptRecord[]> {
    const rows = await this.records().where('holds.batch_id', '=', batchId).orderBy('holds.request_id').execute()
    return rows.map(toRecord)
  }

  /**
   * Fixes a batch's receipts root and its leaves, once: the root a batch is first sent with is the one it keeps (a
   * resumed or re-sent transaction must carry the same). Returns the root stored.
   */
  async commit(batchId: string, root: string, leaves: { requestId: string; leaf: string }[]): Promise<string> {
    return this.db.transaction().execute(async (trx) => {
      const set = await trx
        .updateTable('batches')
        .set({ receipts_root: root })
        .where('id', '=', batchId)
        .where('receipts_root', 'is', null)
        .returning('id')
        .executeTakeFirst()
      if (!set) {
        const b = await trx.selectFrom('batches').select('receipts_root').where('id', '=', batchId).executeTakeFirst()
        if (!b?.receipts_root) throw new Error(`no batch ${batchId} to commit receipts to`)
        return b.receipts_root
      }
      for (let at = 0; at < leaves.length; at += 500)
        await trx
          .insertInto('batch_receipts')
          .values(
            leaves
              .slice(at, at + 500)
              .map((l, i) => ({ batch_id: batchId, position: at + i, request_id: l.requestId, leaf: l.leaf })),
          )
          .execute()
      return root
    })
  }

  /** The batch that carries the account's charge now, with its root and leaves; undefined when none does. */
  async settledIn(accountId: number, requestId: string): Promise<SettledIn | undefined> {
    const b = await this.db
      .selectFrom('holds')
      .innerJoin('batches', 'batches.id', 'holds.batch_id')
      .select(['batches.id', 'batches.status', 'batches.receipts_root', 'batches.tx_hash', 'batches.block'])
      .where('holds.request_id', '=', requestId)
      .where('holds.account_id', '=', accountId)
      .executeTakeFirst()
    if (!b) return undefined
    const leaves = await this.db
      .selectFrom('batch_receipts')
      .select(['request_id', 'leaf'])
      .where('batch_id', '=', b.id)
      .orderBy('position')
      .execute()
    return {
      batchId: b.id,
      status: b.status,
      root: b.receipts_root,
      txHash: b.tx_hash,
      block: bigOrNull(b.block),
      leaves: leaves.map((l) => ({ requestId: l.request_id, leaf: l.leaf })),
    }
  }
}

type Row = Awaited<ReturnType<ReturnType<ReceiptsRepo['records']>['executeTakeFirstOrThrow']>>

function toRecord(r: Row): ReceiptRecord {
  return {
    requestId: r.request_id,
    keyId: r.key_id,
    // A prepaid (x402) account's requests were paid by its wallet.
    payer: walletOfPrepaid(r.address) ?? r.address,
    model: r.model,
    servedModel: r.served_model,
    provider: r.provider,
    bodySha256: r.body_sha256,
    promptTokens: num(r.prompt_tokens ?? 0),
    completionTokens: num(r.completion_tokens ?? 0),
    upstreamPromptTokens: numOrNull(r.upstream_prompt_tokens),
    upstreamCompletionTokens: numOrNull(r.upstream_completion_tokens),
    inputPrice: big(r.input_price ?? 0),
    outputPrice: big(r.output_price ?? 0),
    cost: big(r.cost ?? 0),
    fee: big(r.fee ?? 0),
    outcome: r.outcome!,
    createdAt: num(r.created_at),
  }
}
