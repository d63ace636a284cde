import type { FastifyInstance } from 'fastify'
import type { ReceiptBook } from '../../receipts/book.js'
import type { WireAudit } from '../../receipts/audit-record.js'
import type { AuditRow } from '../../store/audits.js'
import { sessionOf } from '../guard.js'
import { accountOf, seconds, type PortalContext } from '../context.js'
import { auditFinding } from '../../audit/finding.js'

const MAX_AUDITS = 100

/** An audit as its provider reads it; `evidence` is the JSON text its signed record hashes. */
export function wireAudit(a: AuditRow): WireAudit {
  return {
    object: 'audit.record',
    audit_id: a.id,
    model: a.model,
    provider: a.provider,
    prompt_id: a.promptId,
    result: a.result,
    reason: a.reason,
    request_id: a.requestId,
    evidence: JSON.stringify(a.evidence),
    created_at: a.createdAt,
  }
}

/**
 * A provider's audits (`GET /provider/audits`, newest first, `model` and `limit` optional): what was measured of each
 * of its offers, each failed audit's record signed as receipts are, to be checked against the published signers.
 */
export function providerAuditRoutes(api: FastifyInstance, ctx: PortalContext, receipts?: ReceiptBook): void {
  api.get<{ Querystring: { model?: string; limit?: string } }>('/provider/audits', async (req) => {
    const account = await accountOf(ctx, sessionOf(req).accountId)
    const limit = Math.min(MAX_AUDITS, Math.max(1, Number.parseInt(req.query.limit ?? '', 10) || 20))
    const rows = await ctx.store.audits.list({
      provider: account.address,
      ...(req.query.model ? { model: req.query.model } : {}),
      limit,
    })
    const data = await Promise.all(
      rows.map(async (a) => {
        const record = wireAudit(a)
        return {
          audit_id: a.id,
          model: a.model,
          prompt_id: a.promptId,
          result: a.result,
          reason: a.reason,
          finding: auditFinding(a),
          request_id: a.requestId,
          created: seconds(a.createdAt),
          evidence: a.evidence,
          ...(a.result === 'failed' && receipts ? { signed: await receipts.signAudit(record) } : {}),
        }
      }),
    )
    return { object: 'list', data }
  })
}
