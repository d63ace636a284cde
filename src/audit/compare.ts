import { overReported } from '../routing/offer-checks.js'

/**
 * How far an audited reply's log probabilities may sit from the reference's (docs/architecture.md §11a): the mean
 * absolute difference over the tokens both chose, in nats. Kernels that are not bitwise deterministic (batch sizes,
 * reduction order, another GPU) move a token's log probability by thousandths to hundredths of a nat; weights
 * quantized far below the reference, or another model, move most of them by tenths or more.
 */
export const LOGPROB_TOLERANCE = 0.1
/**
 * Two tokens closer than this (in nats, by the reference's log probabilities) are a near tie that such noise may
 * swap: a reply may take the other one there, and is compared no further (the continuations differ from then on).
 */
export const NEAR_TIE = 0.1
/** Tokens a reply must match before a near tie for its audit to conclude; fewer leave it inconclusive. */
export const MIN_COMPARED = 4

/** One generated token, as `logprobs.content` gives it. */
export interface TokenChoice {
  token: string
  logprob: number
  top: { token: string; logprob: number }[]
}

/** What an audit compares of one reply: its tokens (when it sent log probabilities), text, finish and usage. */
export interface AuditAnswer {
  text: string
  /** Undefined when the reply sent no log probabilities: its text is compared alone. */
  tokens?: TokenChoice[]
  finish: string
}

export interface AuditReading extends AuditAnswer {
  /** The output tokens the provider reported, and those the gateway counted. */
  reported?: number
  counted: number
}

export type AuditFailure = 'tokens' | 'logprobs' | 'usage' | 'truncated'

/** The comparison of an audited reply with the reference's answer. */
export interface Verdict {
  /** `inconclusive`: too little to compare (an early near tie, or a reply without the log probabilities asked). */
  result: 'passed' | 'failed' | 'inconclusive'
  reason?: AuditFailure
  /** The first token (or, comparing text, character) where the reply left the reference, and the two there. */
  divergedAt?: number
  expected?: string
  got?: string
  /** Mean and largest absolute log-probability difference over the tokens compared (0 with none). */
  meanGap: number
  maxGap: number
  compared: number
  /** Tokens the reference had (or characters, comparing text). */
  referenceLength: number
  reported?: number
  counted: number
}

/** Compares an audited reply with the reference's answer to the same prompt at temperature 0. */
export function compareAnswers(reference: AuditAnswer, got: AuditReading): Verdict {
  const base = { counted: got.counted, ...(got.reported !== undefined ? { reported: got.reported } : {}) }
  if (got.reported !== undefined && overReported(got.reported, got.counted))
    return { ...base, result: 'failed', reason: 'usage', meanGap: 0, maxGap: 0, compared: 0, referenceLength: 0 }
  if (reference.tokens && got.tokens) return compareTokens(reference.tokens, got.tokens, base)
  const text = compareText(reference.text, got.text, base)
  // Asked for log probabilities and sent none: the same text proves the model, not its precision.
  return text.result === 'passed' && reference.tokens ? { ...text, result: 'inconclusive' } : text
}

function compareTokens(
  ref: readonly TokenChoice[],
  got: readonly TokenChoice[],
  base: Pick<Verdict, 'counted' | 'reported'>,
): Verdict {
  let sum = 0
  let maxGap = 0
  let compared = 0
  const gaps = () => ({
    meanGap: compared ? round(sum / compared) : 0,
    maxGap: round(maxGap),
    compared,
    referenceLength: ref.length,
  })
  for (let i = 0; i < Math.min(ref.length, got.length); i++) {
    const r = ref[i]!
    const g = got[i]!
    if (r.token !== g.token) {
      const at = { divergedAt: i, expected: r.token, got: g.token }
      if (!nearTie(r, g)) return { ...base, result: 'failed', reason: 'tokens', ...at, ...gaps() }
      // Noise may have swapped the two: what came before is judged, if there was enough of it.
      if (compared > 0 && sum / compared > LOGPROB_TOLERANCE)
        return { ...base, result: 'failed', reason: 'logprobs', ...at, ...gaps() }
      return { ...base, result: compared >= MIN_COMPARED ? 'passed' : 'inconclusive', ...at, ...gaps() }
    }
    const gap = Math.abs(r.logprob - g.logprob)
    sum += gap
    maxGap = Math.max(maxGap, gap)
    compared++
  }
  const ended = endMismatch(ref.length, got.length)
  if (ended) {
    const at = Math.min(ref.length, got.length)
    return {
      ...base,
      result: 'failed',
      ...ended,
      divergedAt: at,
      ...endTokens(ref[at]?.token, got[at]?.token),
      ...gaps(),
    }
  }
  if (compared > 0 && sum / compared > LOGPROB_TOLERANCE)
    return { ...base, result: 'failed', reason: 'logprobs', ...gaps() }
  return { ...base, result: 'passed', ...gaps() }
}

/**
 * Whether the reply's token at a divergence was within NEAR_TIE of the reference's own choice, by the reference's
 * alternatives (never the audited reply's own, which a cheat could write as it likes).
 */
function nearTie(r: TokenChoice, g: TokenChoice): boolean {
  const inRef = r.top.find((t) => t.token === g.token)
  return inRef !== undefined && r.logprob - inRef.logprob <= NEAR_TIE
}

/**
 * A reply that ends where the reference went on (both were sent one bound): `truncated`; one that runs past the
 * reference's end: `tokens`; none when both end together.
 */
function endMismatch(refLength: number, length: number): { reason: AuditFailure } | undefined {
  if (length < refLength) return { reason: 'truncated' }
  if (length > refLength) return { reason: 'tokens' }
  return undefined
}

const END = '<end>'
const endTokens = (expected: string | undefined, got: string | undefined) => ({
  expected: expected ?? END,
  got: got ?? END,
})

function compareText(ref: string, got: string, base: Pick<Verdict, 'counted' | 'reported'>): Verdict {
  const same = { meanGap: 0, maxGap: 0, compared: 0, referenceLength: ref.length }
  let i = 0
  while (i < ref.length && i < got.length && ref[i] === got[i]) i++
  if (i === ref.length && i === got.length) return { ...base, result: 'passed', ...same }
  const reason: AuditFailure = i === got.length ? 'truncated' : 'tokens'
  return { ...base, result: 'failed', reason, divergedAt: i, ...endTokens(ref[i], got[i]), ...same }
}

const round = (x: number) => Number(x.toFixed(4))
