import { createHash } from 'node:crypto'
import type { Hex } from 'viem'

/**
 * The EIP-712 type of an audit's record, signed by the receipt key in the receipts' domain: what was measured of an
 * offer, so its provider can hold the marketplace to it. `evidenceSha256` is the SHA-256 of `evidence` as served (its
 * JSON text).
 */
export const AUDIT_RECORD_TYPES = {
  AuditRecord: [
    { name: 'auditId', type: 'string' },
    { name: 'model', type: 'string' },
    { name: 'provider', type: 'string' },
    { name: 'promptId', type: 'string' },
    { name: 'result', type: 'string' },
    { name: 'reason', type: 'string' },
    { name: 'requestId', type: 'string' },
    { name: 'evidenceSha256', type: 'bytes32' },
    { name: 'createdAt', type: 'uint256' },
  ],
} as const

/** An audit as served to its provider: every field is signed (`evidence` through its hash). */
export interface WireAudit {
  object: 'audit.record'
  audit_id: string
  model: string
  provider: string
  prompt_id: string
  result: string
  reason: string | null
  request_id: string | null
  /** The comparison's figures as JSON text: the first diverging token, the two tokens there, the logprob gap. */
  evidence: string
  created_at: number
}

export function auditRecordMessage(a: WireAudit) {
  return {
    auditId: a.audit_id,
    model: a.model,
    provider: a.provider,
    promptId: a.prompt_id,
    result: a.result,
    reason: a.reason ?? '',
    requestId: a.request_id ?? '',
    evidenceSha256: `0x${createHash('sha256').update(a.evidence).digest('hex')}` as Hex,
    createdAt: BigInt(a.created_at),
  }
}
