import type { Readable, Writable } from 'node:stream'

/**
 * Copies a worker's output to the server's own, whole lines at a time, so that the lines of several workers
 * interleave but never split: what a chunk holds after its last newline waits for the rest of its line.
 */
export function forwardLines(from: Readable, to: Writable): { flush(): void } {
  let rest = ''
  from.setEncoding('utf8')
  from.on('data', (chunk: string) => {
    const end = chunk.lastIndexOf('\n')
    if (end < 0) {
      rest += chunk
      return
    }
    to.write(rest + chunk.slice(0, end + 1))
    rest = chunk.slice(end + 1)
  })
  const flush = () => {
    if (rest) to.write(`${rest}\n`)
    rest = ''
  }
  from.on('end', flush)
  return { flush }
}
