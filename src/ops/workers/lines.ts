import type { Readable, Writable } from 'node:stream'

const NEWLINE = 0x0a

/**
 * Copies a worker's output to the server's own, whole lines at a time, so that the lines of several workers
 * interleave but never split: what a chunk holds after its last newline waits for the rest of its line. Bytes are
 * copied as they came (no decoding): a newline byte is never part of a longer UTF-8 character.
 */
export function forwardLines(from: Readable, to: Writable): { flush(): void } {
  let rest: Buffer[] = []
  from.on('data', (chunk: Buffer) => {
    const end = chunk.lastIndexOf(NEWLINE)
    if (end < 0) {
      rest.push(chunk)
      return
    }
    const lines = chunk.subarray(0, end + 1)
    to.write(rest.length ? Buffer.concat([...rest, lines]) : lines)
    rest = end + 1 < chunk.length ? [chunk.subarray(end + 1)] : []
  })
  const flush = () => {
    if (rest.length) to.write(Buffer.concat([...rest, Buffer.from('\n')]))
    rest = []
  }
  from.on('end', flush)
  return { flush }
}
