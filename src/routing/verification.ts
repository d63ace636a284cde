/**
 * What the marketplace's audits found of an offer (docs/architecture.md §11a): `verified` (enough audits passed, none
 * failed lately), `unverified` (too few audits yet), `suspect` (an audit failed lately) or `quarantined` (audits failed
 * past the threshold: no traffic until it passes again).
 */
export type VerificationState = 'verified' | 'unverified' | 'suspect' | 'quarantined'

/** The newest audits that decide a state (of the last day): a failure counts until this many audits followed it. */
export const AUDIT_WINDOW = 10
/** Passed audits (in the window, none failed) that verify an offer. */
export const VERIFIED_PASSES = 3
/** Failed audits in the window that quarantine an offer; fewer make it suspect. */
export const QUARANTINE_FAILURES = 3
/** How far back audits count. */
export const AUDIT_HORIZON_MS = 86_400_000

/**
 * An offer's state from its conclusive audits of the last day, newest first. An offer that cheats on every request is
 * suspect after its first audit and quarantined after its third; one quarantined leaves quarantine once enough passed
 * audits pushed its failures out of the window (AUDIT_WINDOW − QUARANTINE_FAILURES + 1 in a row).
 */
export function verificationOf(results: readonly ('passed' | 'failed')[]): VerificationState {
  const recent = results.slice(0, AUDIT_WINDOW)
  const failed = recent.filter((r) => r === 'failed').length
  if (failed >= QUARANTINE_FAILURES) return 'quarantined'
  if (failed > 0) return 'suspect'
  return recent.length >= VERIFIED_PASSES ? 'verified' : 'unverified'
}

/** What routing reads of offers' states: by health key (`<provider>|<model>`). */
export type StateOf = (key: string) => VerificationState
