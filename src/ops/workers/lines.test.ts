import { once } from 'node:events'
import { PassThrough, Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { forwardLines } from './lines.js'

describe("a worker's output forwarded", () => {
  it('goes out in whole lines however its chunks are cut, characters of several bytes too, and the last on end', async () => {
    const from = new PassThrough()
    const writes: string[] = []
    const to = new Writable({
      write(chunk: Buffer, _encoding, done) {
        writes.push(chunk.toString('utf8'))
        done()
      },
    })
    forwardLines(from, to)
    const text = Buffer.from('{"a":"é€"}\n{"b":2}\n{"c":"日本"}\n{"tail":1}', 'utf8')
    // Cut inside a line and inside a character of three bytes (€ is e2 82 ac).
    const euro = text.indexOf(Buffer.from('€'))
    for (const [i, j] of [
      [0, euro + 1],
      [euro + 1, euro + 2],
      [euro + 2, 20],
      [20, text.length],
    ])
      from.write(text.subarray(i, j))
    from.end()
    await once(from, 'end')
    expect(writes.every((w) => w.endsWith('\n'))).toBe(true)
    expect(writes.join('')).toBe('{"a":"é€"}\n{"b":2}\n{"c":"日本"}\n{"tail":1}\n')
  })
})
