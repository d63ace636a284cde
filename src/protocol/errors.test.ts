import { describe, expect, it } from 'vitest'
import { clipped, cutAt } from './errors.js'

describe('clipped text', () => {
  it('never splits a surrogate pair', () => {
    const text = 'a'.repeat(63) + '😀' + 'b'.repeat(10)
    const cut = clipped(text)
    expect(cut).toBe(`${'a'.repeat(63)}…`)
    expect(JSON.stringify(cut)).not.toMatch(/\\ud83d/)
  })
  it('keeps a pair that ends at the cut', () => {
    expect(cutAt('a'.repeat(62) + '😀' + 'b', 64)).toBe('a'.repeat(62) + '😀')
  })
  it('leaves short text alone', () => {
    expect(clipped('svc/atlas@1')).toBe('svc/atlas@1')
  })
})
