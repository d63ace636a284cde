import { describe, expect, it } from 'vitest'
import { ThinkSplit } from './think-split.js'

const read = (pieces: string[]) => {
  const s = new ThinkSplit()
  const out = { reasoning: '', content: '' }
  for (const p of [...pieces.map((x) => s.push(x)), s.end()]) {
    out.reasoning += p.reasoning
    out.content += p.content
  }
  return out
}

describe('a generation split into reasoning and content', () => {
  const text = '<think>Let me think: is 2 < 3?</think>\n\nYes, 2 < 3.'
  it('takes what is between <think> and </think> at the start as reasoning, however the text is cut', () => {
    const whole = { reasoning: 'Let me think: is 2 < 3?', content: 'Yes, 2 < 3.' }
    expect(read([text])).toEqual(whole)
    for (let i = 1; i < text.length; i++) expect(read([text.slice(0, i), text.slice(i)]), `cut at ${i}`).toEqual(whole)
    expect(read([...text])).toEqual(whole)
  })
  it('leaves a reply that does not open with <think> as content, tags and all', () => {
    expect(read(['Hello <think>x</think>'])).toEqual({ reasoning: '', content: 'Hello <think>x</think>' })
    expect(read(['<thi', 'nking'])).toEqual({ reasoning: '', content: '<thinking' })
  })
  it('keeps a thought never closed as reasoning', () => {
    expect(read(['<think>still going </thi'])).toEqual({ reasoning: 'still going </thi', content: '' })
  })
})
