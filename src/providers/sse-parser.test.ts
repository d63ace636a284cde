import { describe, expect, it } from 'vitest'
import { SseParser } from './sse-parser.js'

const all = (chunks: string[]) => {
  const p = new SseParser()
  const out = chunks.flatMap((c) => p.push(c))
  const last = p.end()
  return last === undefined ? out : [...out, last]
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
