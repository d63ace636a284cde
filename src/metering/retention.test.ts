import { describe, expect, it } from 'vitest'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { countText } from './o200k.js'
import { tokenCount } from './tokens.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** MB the heap grew by across `work`, each side after a full collection. */
function heldBy(work: () => void): number {
  gc()
  const before = process.memoryUsage().heapUsed
  work()
  gc()
  return (process.memoryUsage().heapUsed - before) / 1e6
}

// What the counts keep of the texts they counted: V8 makes a slice of 13 characters or more a view of the whole text.
describe('memory kept by token counts', () => {
  it('keeps none of a counted text for a pre-token it remembers', () => {
    // 100 texts of 1 MB, each with a word of its own: kept through their words, they would be 100 MB.
    const held = heldBy(() => {
      for (let i = 0; i < 100; i++)
        countText(`${'lorem ipsum dolor sit amet '.repeat(40_000)} uniqueword${i.toString(36)}zzzzz end`)
    })
    expect(held).toBeLessThan(10)
  })

  it('keeps no counted text as the last subject of its regular expression', () => {
    const text = `${'lorem ipsum '.repeat(10_000)}end`
    countText(text)
    expect(RegExp.input).not.toBe(text)
  })

  it('keeps no more text than its bound of characters in the count cache', () => {
    // 8 Mi characters at most; the evicted texts, kept by the cache's ring until their slots came round, were 67 MB.
    const held = heldBy(() => {
      for (let i = 0; i < 5_000; i++) tokenCount(`${String(i).padStart(6, '0')} ${'some words '.repeat(1_453)} `)
    })
    expect(held).toBeLessThan(30)
  })
})
