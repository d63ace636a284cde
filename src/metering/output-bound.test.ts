import { describe, expect, it } from 'vitest'
import { OutputBound } from './output-bound.js'
import { tokenCount } from './tokens.js'

/** Feeds `pieces` one by one as a stream's content events; returns the content at the cut, or all of it. */
function feed(bound: OutputBound, pieces: string[]): { content: string; cut: boolean } {
  let content = ''
  for (const p of pieces) {
    content += p
    if (bound.passed(content)) return { content, cut: true }
  }
  return { content, cut: false }
}

const english = (n: number) => Array.from({ length: n }, (_, i) => (i % 3 === 0 ? ' the' : i % 3 === 1 ? ' river' : ' runs'))

describe('OutputBound', () => {
  it('never cuts a reply within its bound', () => {
    for (const m of [1, 16, 500]) expect(feed(new OutputBound(m), english(m)).cut).toBe(false)
  })

  it('cuts text of up to 8 characters a token at its first count, past the bound', () => {
    const { content, cut } = feed(new OutputBound(1000), english(100_000))
    expect(cut).toBe(true)
    expect(tokenCount(content)).toBeGreaterThan(1000)
    expect(content.length).toBeLessThanOrEqual(8000 + 6)
  })

  it('cuts text of more characters a token within about an eighth past the bound', () => {
    // Words of 9 characters and their space, one token each or two: counted at 8000 characters, then as it nears 1000.
    const long = Array.from({ length: 100_000 }, (_, i) => ` ${['underline', 'parliament', 'breakfast'][i % 3]}`)
    const { content, cut } = feed(new OutputBound(1000), long)
    expect(cut).toBe(true)
    const n = tokenCount(content)
    expect(n).toBeGreaterThan(1000)
    expect(n).toBeLessThanOrEqual(1125)
  })

  it('cuts dense text at 8 characters a token of the bound', () => {
    const { content, cut } = feed(new OutputBound(1000), Array.from({ length: 100_000 }, () => '語'))
    expect(cut).toBe(true)
    expect(content.length).toBeLessThanOrEqual(8000)
  })

  it('bounds tool-call arguments by their characters', () => {
    const bound = new OutputBound(10)
    expect(bound.argumentsPassed('x'.repeat(320))).toBe(false)
    expect(bound.argumentsPassed(undefined)).toBe(false)
    expect(bound.argumentsPassed('x')).toBe(true)
  })
})
