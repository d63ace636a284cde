import type { AuditRow } from '../store/audits.js'
import { LOGPROB_TOLERANCE } from './compare.js'

/** Where an audit's reply left the reference, in words; null for one that passed. */
export function auditFinding(a: AuditRow): string | null {
  const e = a.evidence as { divergedAt?: number; expected?: string; got?: string; meanGap?: number; why?: string }
  if (a.result === 'passed') return null
  if (a.result === 'inconclusive') return `no comparison: ${e.why ?? 'no reply'}`
  if (a.reason === 'usage')
    return `reported ${String(a.evidence.reported)} output tokens; the gateway counted ${String(a.evidence.counted)}`
  if (a.reason === 'logprobs')
    return `log probabilities ${e.meanGap} nats from the reference's on average (at most ${LOGPROB_TOLERANCE})`
  return `${a.reason === 'truncated' ? 'ended' : 'left the reference'} at token ${e.divergedAt}: expected ${JSON.stringify(e.expected)}, got ${JSON.stringify(e.got)}`
}
