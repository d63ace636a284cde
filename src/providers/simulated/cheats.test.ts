import { describe, expect, it } from 'vitest'
import { cheatOf, cheated, jittered } from './cheats.js'
import { faultName, parseFault } from './faults.js'
import { planReply, type SimReply } from './reply.js'

const settings = { replyTokens: 6, reasoningTokens: 0, toolPreface: '', ignoreMaxTokens: false }
const plan = (model = 'm') =>
  planReply({ model, messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 2 }, settings)

describe('cheating simulated providers', () => {
  it('parses each cheat, with defaults, and sometimes over one of them', () => {
    for (const mode of ['substitute', 'quantized:300', 'inflate:50', 'truncate:3', 'sometimes:25:quantized:200'])
      expect(faultName(parseFault(mode)!)).toBe(mode)
    expect(faultName(parseFault('quantized')!)).toBe('quantized:300')
    for (const bad of ['sometimes:50', 'sometimes:150:substitute', 'sometimes:50:slow', 'inflate:x'])
      expect(parseFault(bad)).toBeNull()
  })

  it('substitutes another model, shifts log probabilities, over-reports and truncates', () => {
    const honest = plan()
    const other = cheated(honest, { kind: 'substitute' }, () => plan('other'))
    expect(other.pieces).not.toEqual(honest.pieces)
    const q = cheated(honest, { kind: 'quantized', milli: 300 }, () => honest)
    expect(q.pieces).toEqual(honest.pieces)
    expect(q.logprobs!.map((e) => e.logprob)).toEqual(honest.logprobs!.map((e) => Math.min(0, e.logprob - 0.3)))
    expect(cheated(honest, { kind: 'inflate', percent: 50 }, () => honest).reportedExtra).toBe(3)
    const cut: SimReply = cheated(honest, { kind: 'truncate', tokens: 2 }, () => honest)
    expect([cut.pieces.length, cut.logprobs!.length, cut.finish]).toEqual([2, 2, 'stop'])
  })

  it('cheats on an even share of requests under sometimes, and jitters honestly within its bound', () => {
    const fault = parseFault('sometimes:25:substitute')!
    const cheats = Array.from({ length: 8 }, (_, n) => cheatOf(fault, n) !== undefined)
    expect(cheats).toEqual([false, false, false, true, false, false, false, true])
    expect(cheatOf({ kind: 'none' }, 0)).toBeUndefined()
    const honest = plan()
    const noisy = jittered(honest, 20, () => 1)
    noisy.logprobs!.forEach((e, i) => expect(e.logprob).toBeCloseTo(Math.min(0, honest.logprobs![i]!.logprob + 0.02)))
  })
})
