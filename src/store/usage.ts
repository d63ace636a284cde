import { sql, type ExpressionBuilder, type Insertable, type Kysely, type Selectable } from 'kysely'
import type { Database, UsageTable } from './schema.js'
import type { StoreDialect } from './dialect.js'
import type { DailySpend, UsageFilter, UsageSummary, UsageTotals } from './usage-types.js'

export type { DailySpend, UsageFilter, UsageSummary, UsageTotals } from './usage-types.js'
import { big, num, numOrNull } from './ints.js'
import { InFlightRepo, type InFlight } from './instances.js'

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
  /** Its gateway instance died while serving it; its hold was released, nothing charged. */
  | 'cut_off'

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
  /** SHA-256 (hex) of the request body as received; what its receipt states. */
  bodySha256?: string | null
  /** Prices per million tokens of the offer that served it. */
  prices?: { input: bigint; output: bigint } | null
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

/** The record of a request cut off by its instance's death: served for nothing, charged nothing. */
function cutOffRecord(r: InFlight & { cutOffAt: number }): UsageRecord {
  return {
    requestId: r.requestId,
    accountId: r.accountId,
    keyId: r.keyId,
    model: r.model,
    servedModel: null,
    provider: null,
    stream: r.stream,
    promptTokens: r.promptTokens,
    completionTokens: 0,
    upstreamPromptTokens: null,
    upstreamCompletionTokens: null,
    cost: 0n,
    outcome: 'cut_off',
    latencyMs: r.cutOffAt - r.createdAt,
    createdAt: r.createdAt,
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

export interface UsageQuery extends UsageFilter {
  limit: number
  /** Cursor: the request id of the last row of the previous page. */
  after?: string
}

export const DAY_MS = 86_400_000

/**
 * A row's UTC day, as a day number. A literal, not a parameter: Postgres matches the grouped expression by its text,
 * and SQLite divides integers.
 */
export const DAY_OF = sql<bigint>`created_at / ${sql.lit(DAY_MS)}`

/** The account's rows, narrowed by the filter. */
export function matching(accountId: number, f: UsageFilter) {
  return (eb: ExpressionBuilder<Database, 'usage'>) => {
    const conds = [eb('account_id', '=', accountId)]
    if (f.keyId) conds.push(eb('key_id', '=', f.keyId))
    if (f.model) conds.push(eb('model', '=', f.model))
    if (f.since !== undefined) conds.push(eb('created_at', '>=', BigInt(f.since)))
    return eb.and(conds)
  }
}

export class UsageRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {}

  /** A request's record; a request its instance cut off by dying has one once its hold is released (`cut_off`). */
  async get(accountId: number, requestId: string): Promise<UsageRecord | undefined> {
    const r = await this.db
      .selectFrom('usage')
      .selectAll()
      .where('request_id', '=', requestId)
      .where('account_id', '=', accountId)
      .executeTakeFirst()
    if (r) return toRecord(r)
    const cut = await new InFlightRepo(this.db).cutOff(accountId, requestId)
    return cut && cutOffRecord(cut)
  }

  /** Newest first; pages continue after the cursor's (created_at, request_id). */
  async list(accountId: number, q: UsageQuery): Promise<UsageRecord[]> {
    let query = this.db.selectFrom('usage').selectAll().where(matching(accountId, q))
    if (q.after) {
      const cursor = await this.db
        .selectFrom('usage')
        .select(['created_at', 'request_id'])
        .where('request_id', '=', q.after)
        .where('account_id', '=', accountId)
        .executeTakeFirst()
      if (cursor) {
        query = query.where((eb) =>
          eb.or([
            eb('created_at', '<', cursor.created_at),
            eb.and([eb('created_at', '=', cursor.created_at), eb('request_id', '<', cursor.request_id)]),
          ]),
        )
      }
    }
    const rows = await query.orderBy('created_at', 'desc').orderBy('request_id', 'desc').limit(q.limit).execute()
    return rows.map(toRecord)
  }

  /** Totals of the account's requests matching the filter. */
  async totals(accountId: number, f: UsageFilter = {}): Promise<UsageTotals> {
    const r = await this.db
      .selectFrom('usage')
      .select([
        (eb) => eb.fn.countAll().as('requests'),
        sql<bigint>`coalesce(sum(prompt_tokens), 0)`.as('prompt'),
        sql<bigint>`coalesce(sum(completion_tokens), 0)`.as('completion'),
        sql<bigint>`coalesce(sum(cost), 0)`.as('cost'),
      ])
      .where(matching(accountId, f))
      .executeTakeFirstOrThrow()
    return {
      requests: num(r.requests),
      promptTokens: num(r.prompt),
      completionTokens: num(r.completion),
      cost: big(r.cost),
    }
  }

  /**
   * The account's totals and its spend per day since `since` (the start of a day), both filtered alike. On SQLite, read
   * in slices of time so that the event loop is never held for the whole history (sqlite/usage-summary.ts).
   */
  async summary(accountId: number, filter: UsageFilter, since: number): Promise<UsageSummary> {
    // Mid-day, Postgres would count that day from `since` on and the slices the whole day or none of it.
    if (since % DAY_MS !== 0) throw new RangeError(`a usage summary's days begin at the start of one (${since})`)
    const whole = async () => {
      const [totals, daily] = await Promise.all([
        this.totals(accountId, filter),
        this.daily(accountId, { ...filter, since }),
      ])
      return { totals, daily }
    }
    return this.dialect.usageSummary(this.db, { accountId, filter, since, whole })
  }

  /** Spend per UTC day (days without requests are absent), oldest first. */
  async daily(accountId: number, f: UsageFilter = {}): Promise<DailySpend[]> {
    const rows = await this.db
      .selectFrom('usage')
      .select([
        DAY_OF.as('day'),
        (eb) => eb.fn.countAll().as('requests'),
        sql<bigint>`coalesce(sum(cost), 0)`.as('cost'),
      ])
      .where(matching(accountId, f))
      .groupBy(DAY_OF)
      .orderBy(DAY_OF)
      .execute()
    return rows.map((r) => ({ day: num(r.day) * DAY_MS, requests: num(r.requests), cost: big(r.cost) }))
  }
}
