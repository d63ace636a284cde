import { describe, expect, it } from 'vitest'
import { SseParser } from './sse-parser.js'

const all = (chunks: string[]) => {
  const p = new SseParser()
  const out = chunks.flatMap((c) => p.push(c))
  const last = p.end()
  return last === undefined ? out : [...out, last]
}

/**
 * Characters that `indexOf` scanned for a line end while `run` ran: what a search that finds nothing costs (the rest
 * of the string) and what one that finds a line end costs (the stretch up to it).
 */
function lineEndSearchCost(run: () => void): number {
  const indexOf = String.prototype.indexOf
  let scanned = 0
  String.prototype.indexOf = function (this: string, search: string, position?: number) {
    const found = indexOf.call(this, search, position)
    if (search === '\n' || search === '\r')
      scanned += (found < 0 ? this.length : found + 1) - Math.max(0, position ?? 0)
    return found
  }
  try {
    run()
  } finally {
    String.prototype.indexOf = indexOf
  }
  return scanned
}

describe('SseParser', () => {
  it('reads LF, CRLF and CR line ends, in one chunk or split anywhere', () => {
    const text = 'data: a\n\ndata: b\r\n\r\ndata: c\r\rdata:d\n\n: comment\nevent: x\ndata: e\n\n'
    const want = ['a', 'b', 'c', 'd', 'e']
    expect(all([text])).toEqual(want)
    expect(all(text.split(''))).toEqual(want)
    for (let i = 1; i < text.length; i++) expect(all([text.slice(0, i), text.slice(i)])).toEqual(want)
  })

  it('joins multi-line data, and returns an event left open at the end', () => {
    expect(all(['data: {"a":\ndata: 1}\n\n', 'data: [DONE]'])).toEqual(['{"a":\n1}', '[DONE]'])
  })

  it('finds a CR that comes after many LF lines of the same chunk', () => {
    const lines = Array.from({ length: 50 }, (_, i) => `data: ${i}\n\n`).join('')
    expect(all([`${lines}data: last\r\r`])).toEqual([...Array.from({ length: 50 }, (_, i) => String(i)), 'last'])
  })

  it('finds a LF that comes after many CR lines of the same chunk', () => {
    const lines = Array.from({ length: 50 }, (_, i) => `data: ${i}\r\r`).join('')
    expect(all([`${lines}data: last\n\n`])).toEqual([...Array.from({ length: 50 }, (_, i) => String(i)), 'last'])
  })

  it('searches each stretch of a read for line ends once, whichever line end the stream uses', () => {
    const lines = 10_000
    for (const end of ['\n', '\r', '\r\n']) {
      // The comment's line ends the last event, whose CR might otherwise be the first half of a CRLF.
      const text = `${`data: x${end}${end}`.repeat(lines / 2)}: end\n`
      let events: string[] = []
      const cost = lineEndSearchCost(() => (events = new SseParser().push(text)))
      expect(events).toHaveLength(lines / 2)
      // Each kind of line end searched for once by the loop and once by the check on arrival for any: four times the
      // text at most.
      expect(cost, JSON.stringify(end)).toBeLessThanOrEqual(4 * text.length)
    }
  })

  it('counts each data line it holds as it came, an empty one too, so that a stream of them reaches the size limit', () => {
    const p = new SseParser()
    for (let i = 0; i < 100; i++) expect(p.push('data:\n'.repeat(1000))).toEqual([])
    expect(p.buffered).toBe(600_000)
    expect(p.push('data: abc\n: a comment not yet ended')).toEqual([])
    expect(p.buffered).toBe(600_000 + 'data: abc\n'.length + ': a comment not yet ended'.length)
    expect(p.push('\n\n')).toEqual([`${'\n'.repeat(100_000)}abc`])
    expect(p.buffered).toBe(0)
    expect(p.push('data: x\r\n')).toEqual([])
    expect(p.buffered).toBe('data: x\n'.length)
    expect(p.end()).toBe('x')
    expect(p.buffered).toBe(0)
  })

  it('reads a long line that came in many reads, and counts what it holds until the line ends', () => {
    const p = new SseParser()
    const piece = 'y'.repeat(1000)
    expect(p.push('data: {"a":"')).toEqual([])
    for (let i = 0; i < 2000; i++) expect(p.push(piece)).toEqual([])
    expect(p.buffered).toBe('data: {"a":"'.length + 2_000_000)
    expect(p.push('"}\r')).toEqual([])
    expect(p.push('\n\r\n')).toEqual([`{"a":"${piece.repeat(2000)}"}`])
    expect(p.buffered).toBe(0)
  })
})
