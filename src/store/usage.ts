import type { Insertable, Kysely, Selectable } from 'kysely'
import type { Database, UsageTable } from './schema.js'
import { big, num, numOrNull } from './dialect.js'

/** Outcome of a request as recorded in usage. */
export type Outcome =
  | 'completed'
  | 'client_closed'
  | 'insufficient_quota'
  | 'no_capacity'
  | 'provider_output_invalid'
  | 'stream_interrupted'
  | 'expired'
  | 'abandoned'

export interface UsageRecord {
  requestId: string
  accountId: number
  keyId: string
  model: string
  servedModel: string | null
  provider: string | null
  stream: boolean
  promptTokens: number
  completionTokens: number
  upstreamPromptTokens: number | null
  upstreamCompletionTokens: number | null
  cost: bigint
  outcome: Outcome
  latencyMs: number
  createdAt: number
}

export function usageRow(u: UsageRecord): Insertable<UsageTable> {
  return {
    request_id: u.requestId,
    account_id: u.accountId,
    key_id: u.keyId,
    model: u.model,
    served_model: u.servedModel,
    provider: u.provider,
    stream: u.stream ? 1 : 0,
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    upstream_prompt_tokens: u.upstreamPromptTokens,
    upstream_completion_tokens: u.upstreamCompletionTokens,
    cost: u.cost,
    outcome: u.outcome,
    latency_ms: u.latencyMs,
    created_at: BigInt(u.createdAt),
  }
}

function toRecord(r: Selectable<UsageTable>): UsageRecord {
  return {
    requestId: r.request_id,
    accountId: num(r.account_id),
    keyId: r.key_id,
    model: r.model,
    servedModel: r.served_model,
    provider: r.provider,
    stream: num(r.stream) === 1,
    promptTokens: num(r.prompt_tokens),
    completionTokens: num(r.completion_tokens),
    upstreamPromptTokens: numOrNull(r.upstream_prompt_tokens),
    upstreamCompletionTokens: numOrNull(r.upstream_completion_tokens),
    cost: big(r.cost),
    outcome: r.outcome as Outcome,
    latencyMs: num(r.latency_ms),
    createdAt: num(r.created_at),
  }
}

export interface UsageQuery {
  limit: number
  /** Cursor: the request id of the last row of the previous page. */
  after?: string
  keyId?: string
  model?: string
  since?: number
}

export class UsageRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(u: UsageRecord): Promise<void> {
    await this.db.insertInto('usage').values(usageRow(u)).onConflict((oc) => oc.column('request_id').doNothing()).execute()
  }

  async get(accountId: number, requestId: string): Promise<UsageRecord | undefined> {
    const r = await this.db.selectFrom('usage').selectAll().where('request_id', '=', requestId).where('account_id', '=', accountId).executeTakeFirst()
    return r && toRecord(r)
  }

  /** Newest first; pages continue after the cursor's (created_at, request_id). */
  async list(accountId: number, q: UsageQuery): Promise<UsageRecord[]> {
    let query = this.db.selectFrom('usage').selectAll().where('account_id', '=', accountId)
    if (q.keyId) query = query.where('key_id', '=', q.keyId)
    if (q.model) query = query.where('model', '=', q.model)
    if (q.since !== undefined) query = query.where('created_at', '>=', BigInt(q.since))
    if (q.after) {
      const cursor = await this.db.selectFrom('usage').select(['created_at', 'request_id']).where('request_id', '=', q.after).where('account_id', '=', accountId).executeTakeFirst()
      if (cursor) {
        query = query.where((eb) =>
          eb.or([eb('created_at', '<', cursor.created_at), eb.and([eb('created_at', '=', cursor.created_at), eb('request_id', '<', cursor.request_id)])]),
        )
      }
    }
    const rows = await query.orderBy('created_at', 'desc').orderBy('request_id', 'desc').limit(q.limit).execute()
    return rows.map(toRecord)
  }
}
