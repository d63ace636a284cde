import { Writable } from 'node:stream'
import { pino, type Logger } from 'pino'
import { expect } from 'vitest'

/** A logger at info whose lines are kept: parsed, and as written. */
export function keptLogs(): { logger: Logger; lines: Record<string, unknown>[]; raw: () => string } {
  const lines: Record<string, unknown>[] = []
  let raw = ''
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      raw += chunk.toString()
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l))
      done()
    },
  })
  return { logger: pino({ level: 'info' }, sink), lines, raw: () => raw }
}

/** The metrics text at `url` as a map of `name{labels}` → value; every line must parse as Prometheus exposition. */
export async function scrape(url: string): Promise<Map<string, number>> {
  const res = await fetch(url)
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toMatch(/text\/plain/)
  const out = new Map<string, number>()
  for (const line of (await res.text()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$/.exec(line)
    expect(match, `not Prometheus exposition: ${line}`).not.toBeNull()
    out.set(match![1]!, Number(match![2]))
  }
  return out
}

/** How far the series `key` moved from scrape `a` to scrape `b`. */
export const moved = (a: Map<string, number>, b: Map<string, number>, key: string) =>
  (b.get(key) ?? 0) - (a.get(key) ?? 0)
