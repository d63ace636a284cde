import { describe, expect, it } from 'vitest'
import { OutputBound } from './output-bound.js'
import { tokenCount } from './tokens.js'

/** Feeds `pieces` one by one as a stream's content events; returns the content at the cut, or all of it. */
function feed(bound: OutputBound, pieces: string[]): { content: string; cut: boolean } {
  let content = ''
  for (const p of pieces) {
    content += p
    if (bound.passed(content, p)) return { content, cut: true }
  }
  return { content, cut: false }
}

const english = (n: number) =>
  Array.from({ length: n }, (_, i) => (i % 3 === 0 ? ' the' : i % 3 === 1 ? ' river' : ' runs'))

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

  it('cuts Chinese at its first count, within about twice the bound', () => {
    // About 1.1 characters a token: counted at 2000 characters, 8 times the bound's characters at 8 a token.
    const { content, cut } = feed(
      new OutputBound(1000),
      Array.from({ length: 100_000 }, (_, i) => '河流穿过城市，港口里停满了船。'[i % 15]!),
    )
    expect(cut).toBe(true)
    expect(content.length).toBeLessThanOrEqual(2000)
    expect(tokenCount(content)).toBeGreaterThan(1000)
  })

  it('never cuts text outside ASCII within its bound; past it, cuts text of more than 2 characters a token within about an eighth', () => {
    // About 3.3 and 1.1 characters a token: the first counted before its bound, the second only past it.
    for (const [sentence, most] of [
      ['Река течёт через город, а в гавани стоят корабли. ', 1.125],
      ['川が町を流れ、港には船が並んでいる。', 2],
    ] as const) {
      let text = ''
      while (tokenCount(text + sentence) <= 500) text += sentence
      expect(feed(new OutputBound(500), [...text]).cut).toBe(false)
      const { content, cut } = feed(new OutputBound(500), [...text.repeat(3)])
      expect(cut).toBe(true)
      expect(tokenCount(content)).toBeGreaterThan(500)
      expect(tokenCount(content)).toBeLessThanOrEqual(500 * most)
    }
  })

  it('bounds tool-call arguments by their characters', () => {
    const bound = new OutputBound(10)
    expect(bound.argumentsPassed('x'.repeat(320))).toBe(false)
    expect(bound.argumentsPassed(undefined)).toBe(false)
    expect(bound.argumentsPassed('x')).toBe(true)
  })
})
