import { describe, expect, it } from 'vitest'
import { compareAnswers, LOGPROB_TOLERANCE, type AuditAnswer, type TokenChoice } from './compare.js'
import { verificationOf } from '../routing/verification.js'

const tok = (token: string, logprob: number, alternatives: [string, number][] = []): TokenChoice => ({
  token,
  logprob,
  top: [[token, logprob] as [string, number], ...alternatives].map(([t, lp]) => ({ token: t, logprob: lp })),
})
const answer = (tokens: TokenChoice[], finish = 'stop'): AuditAnswer => ({
  text: tokens.map((t) => t.token).join(''),
  tokens,
  finish,
})
const reference = answer([tok('The', -0.1), tok(' capital', -0.2, [[' city', -0.25]]), tok(' is', -0.05)])
const reading = (a: AuditAnswer, reported?: number) => ({ ...a, counted: a.tokens?.length ?? 0, reported })

describe('comparing an audited reply with the reference', () => {
  it('passes the same tokens within the tolerance, and a near tie taken the other way', () => {
    const noisy = answer([tok('The', -0.11), tok(' capital', -0.19), tok(' is', -0.06)])
    expect(compareAnswers(reference, reading(noisy, 3))).toMatchObject({ result: 'passed', compared: 3 })
    // ' city' was within NEAR_TIE of ' capital' by the reference's own alternatives: compared no further, and with
    // one token matched before it, too little to conclude.
    const tie = answer([tok('The', -0.1), tok(' city', -0.2), tok(' of', -1)])
    expect(compareAnswers(reference, reading(tie))).toMatchObject({ result: 'inconclusive', compared: 1 })
    const long = answer([
      tok('A', -0.1),
      tok(' b', -0.1),
      tok(' c', -0.1),
      tok(' d', -0.1),
      tok(' e', -0.1, [[' f', -0.12]]),
    ])
    const swapped = answer([...long.tokens!.slice(0, 4), tok(' f', -0.12), tok(' g', -2)])
    expect(compareAnswers(long, reading(swapped))).toMatchObject({ result: 'passed', compared: 4, divergedAt: 4 })
    // A tie the audited reply claims by its own alternatives is no tie: only the reference's count.
    const claimed = answer([...long.tokens!.slice(0, 4), tok(' z', -0.1, [[' e', -0.1]])])
    expect(compareAnswers(long, reading(claimed))).toMatchObject({ result: 'failed', reason: 'tokens', divergedAt: 4 })
  })

  it('fails other tokens, shifted log probabilities, an early end, a longer reply and inflated usage', () => {
    const other = answer([tok('The', -0.1), tok(' answer', -0.3)])
    expect(compareAnswers(reference, reading(other))).toMatchObject({
      result: 'failed',
      reason: 'tokens',
      divergedAt: 1,
      expected: ' capital',
      got: ' answer',
    })
    const shift = LOGPROB_TOLERANCE * 2
    const quantized = answer(reference.tokens!.map((t) => tok(t.token, t.logprob - shift)))
    expect(compareAnswers(reference, reading(quantized))).toMatchObject({ result: 'failed', reason: 'logprobs' })
    const cut = answer(reference.tokens!.slice(0, 2))
    expect(compareAnswers(reference, reading(cut))).toMatchObject({
      result: 'failed',
      reason: 'truncated',
      divergedAt: 2,
      expected: ' is',
      got: '<end>',
    })
    const longer = answer([...reference.tokens!, tok(' Paris', -0.1)])
    expect(compareAnswers(reference, reading(longer))).toMatchObject({ result: 'failed', reason: 'tokens' })
    expect(compareAnswers(reference, reading(reference, 9))).toMatchObject({ result: 'failed', reason: 'usage' })
    // Within the slack an engine's end-of-turn token is not evidence.
    expect(compareAnswers(reference, reading(reference, 5)).result).toBe('passed')
  })

  it('compares the text of a reply without log probabilities: the same text is inconclusive, another fails', () => {
    const text = (t: string) => ({ text: t, finish: 'stop', counted: 3 })
    // The reference sent log probabilities: the same text without them proves the model, not its precision.
    expect(compareAnswers(reference, text('The capital is')).result).toBe('inconclusive')
    expect(compareAnswers({ text: 'The capital is', finish: 'stop' }, text('The capital is')).result).toBe('passed')
    expect(compareAnswers(reference, text('The capital'))).toMatchObject({ reason: 'truncated', divergedAt: 11 })
    expect(compareAnswers(reference, text('The city is'))).toMatchObject({ reason: 'tokens', divergedAt: 5 })
  })
})

describe('verification states', () => {
  it('verifies after three passes, is suspect at a failure, quarantined at three, and recovers past the window', () => {
    expect(verificationOf([])).toBe('unverified')
    expect(verificationOf(['passed', 'passed'])).toBe('unverified')
    expect(verificationOf(['passed', 'passed', 'passed'])).toBe('verified')
    expect(verificationOf(['failed'])).toBe('suspect')
    expect(verificationOf(['failed', 'failed', 'passed', 'failed'])).toBe('quarantined')
    const quarantined = ['failed', 'failed', 'failed'] as const
    expect(verificationOf([...Array(7).fill('passed'), ...quarantined])).toBe('quarantined')
    expect(verificationOf([...Array(8).fill('passed'), ...quarantined])).toBe('suspect')
    expect(verificationOf([...Array(10).fill('passed'), ...quarantined])).toBe('verified')
  })
})
