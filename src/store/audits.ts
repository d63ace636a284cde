import type { Kysely } from 'kysely'
import type { AuditsTable, Database, OfferStatesTable } from './schema.js'

/** One audit as kept: its evidence is the comparison's JSON. */
export interface AuditRow {
  id: string
  model: string
  provider: string
  offerSignature: string
  promptId: string
  result: 'passed' | 'failed' | 'inconclusive'
  reason: string | null
  /** The audit request's id: its usage record and receipt. */
  requestId: string | null
  evidence: Record<string, unknown>
  createdAt: number
}

/** A reference's recorded answer to one prompt at one bound. */
export interface ReferenceAnswer {
  provider: string
  /** What the reference offer served when it answered (`Offer.signature`). */
  offerSignature: string
  requestId: string | null
  answer: Record<string, unknown>
  recordedAt: number
}

/** An offer's verification state as its audits left it. */
export interface OfferStateRow {
  provider: string
  model: string
  state: string
  offerSignature: string
  /** Conclusive audits of the last day, passed and failed. */
  passed: number
  failed: number
  lastAuditAt: number
  /** When it entered this state. */
  since: number
}

const rowOf = (r: AuditsTable): AuditRow => ({
  id: r.id,
  model: r.model,
  provider: r.provider,
  offerSignature: r.offer_signature,
  promptId: r.prompt_id,
  result: r.result as AuditRow['result'],
  reason: r.reason,
  requestId: r.request_id,
  evidence: JSON.parse(r.evidence) as Record<string, unknown>,
  createdAt: Number(r.created_at),
})

const stateOf = (r: OfferStatesTable): OfferStateRow => ({
  provider: r.provider,
  model: r.model,
  state: r.state,
  offerSignature: r.offer_signature,
  passed: Number(r.passed),
  failed: Number(r.failed),
  lastAuditAt: Number(r.last_audit_at),
  since: Number(r.since),
})

/** Audits of offers, the references they are compared with, and the offers' verification states. */
export class AuditRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async record(a: AuditRow): Promise<void> {
    await this.db
      .insertInto('audits')
      .values({
        id: a.id,
        model: a.model,
        provider: a.provider,
        offer_signature: a.offerSignature,
        prompt_id: a.promptId,
        result: a.result,
        reason: a.reason,
        request_id: a.requestId,
        evidence: JSON.stringify(a.evidence),
        created_at: BigInt(a.createdAt),
      })
      .execute()
  }

  /** An offer's conclusive audits since `since`, newest first, at most `limit`. */
  async conclusive(provider: string, model: string, since: number, limit: number): Promise<AuditRow[]> {
    const rows = await this.db
      .selectFrom('audits')
      .selectAll()
      .where('provider', '=', provider)
      .where('model', '=', model)
      .where('created_at', '>=', BigInt(since))
      .where('result', '!=', 'inconclusive')
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute()
    return rows.map(rowOf)
  }

  /** Audits newest first, optionally of one provider, model or result; at most `limit`. */
  async list(f: { provider?: string; model?: string; result?: string; limit: number }): Promise<AuditRow[]> {
    let q = this.db.selectFrom('audits').selectAll()
    if (f.provider) q = q.where('provider', '=', f.provider)
    if (f.model) q = q.where('model', '=', f.model)
    if (f.result) q = q.where('result', '=', f.result)
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(f.limit).execute()
    return rows.map(rowOf)
  }

  async get(id: string): Promise<AuditRow | undefined> {
    const r = await this.db.selectFrom('audits').selectAll().where('id', '=', id).executeTakeFirst()
    return r && rowOf(r)
  }

  /** Counts of an offer's audits by result since `since`. */
  async counts(provider: string, model: string, since: number): Promise<Record<AuditRow['result'], number>> {
    const rows = await this.db
      .selectFrom('audits')
      .select(['result', (eb) => eb.fn.countAll<string | number | bigint>().as('n')])
      .where('provider', '=', provider)
      .where('model', '=', model)
      .where('created_at', '>=', BigInt(since))
      .groupBy('result')
      .execute()
    const out = { passed: 0, failed: 0, inconclusive: 0 }
    for (const r of rows) out[r.result as AuditRow['result']] = Number(r.n)
    return out
  }

  async reference(model: string, promptId: string, maxTokens: number): Promise<ReferenceAnswer | undefined> {
    const r = await this.db
      .selectFrom('audit_references')
      .selectAll()
      .where('model', '=', model)
      .where('prompt_id', '=', promptId)
      .where('max_tokens', '=', maxTokens)
      .executeTakeFirst()
    if (!r) return undefined
    return {
      provider: r.provider,
      offerSignature: r.offer_signature,
      requestId: r.request_id,
      answer: JSON.parse(r.answer) as Record<string, unknown>,
      recordedAt: Number(r.recorded_at),
    }
  }

  /** Records (or replaces, when another reference answered) the reference's answer to a prompt at a bound. */
  async recordReference(model: string, promptId: string, maxTokens: number, ref: ReferenceAnswer): Promise<void> {
    const values = {
      provider: ref.provider,
      offer_signature: ref.offerSignature,
      request_id: ref.requestId,
      answer: JSON.stringify(ref.answer),
      recorded_at: BigInt(ref.recordedAt),
    }
    await this.db
      .insertInto('audit_references')
      .values({ model, prompt_id: promptId, max_tokens: maxTokens, ...values })
      .onConflict((oc) => oc.columns(['model', 'prompt_id', 'max_tokens']).doUpdateSet(values))
      .execute()
  }

  /** Writes an offer's state (its `since` kept while the state is unchanged). */
  async setState(s: OfferStateRow): Promise<void> {
    const values = {
      state: s.state,
      offer_signature: s.offerSignature,
      passed: s.passed,
      failed: s.failed,
      last_audit_at: BigInt(s.lastAuditAt),
      since: BigInt(s.since),
    }
    await this.db
      .insertInto('offer_states')
      .values({ provider: s.provider, model: s.model, ...values })
      .onConflict((oc) => oc.columns(['provider', 'model']).doUpdateSet(values))
      .execute()
  }

  async states(): Promise<OfferStateRow[]> {
    return (await this.db.selectFrom('offer_states').selectAll().execute()).map(stateOf)
  }
}
