/** Fault modes of the simulated upstream (README, `svc sim-provider`), switchable while it runs. */
export type Fault =
  | { kind: 'none' }
  | { kind: 'slow'; ms: number }
  /** Holds every request until the mode is switched to another one. */
  | { kind: 'stall' }
  | { kind: 'status-500' }
  | { kind: 'status-429' }
  | { kind: 'garbage' }
  | { kind: 'break-after'; chunks: number }
  | { kind: 'bad-tool-args' }
  | { kind: 'empty-tool-name' }
  | { kind: 'refuse-connections' }
  /** The engine fails after N output events (or a whole reply) with a server error, written in its dialect. */
  | { kind: 'error-after'; chunks: number }
  /** The engine gives up after N output events with its abort finish reason, and ends the stream as usual. */
  | { kind: 'abort-after'; chunks: number }
  /** The engine refuses the request as invalid inside its 200 stream, before any output (as TGI validates). */
  | { kind: 'refuse-in-stream' }

export const FAULT_MODES = [
  'none',
  'slow[:MS]',
  'stall',
  'status-500',
  'status-429',
  'garbage',
  'break-after:N',
  'bad-tool-args',
  'empty-tool-name',
  'refuse-connections',
  'error-after:N',
  'abort-after:N',
  'refuse-in-stream',
]

const DEFAULT_SLOW_MS = 30_000

/** Parses `slow`, `slow:500`, `break-after:3`, …; null when the text names no mode. */
export function parseFault(text: string): Fault | null {
  const [name, arg] = text.split(':', 2) as [string, string | undefined]
  const n = arg === undefined ? undefined : Number(arg)
  if (n !== undefined && !(Number.isInteger(n) && n >= 0)) return null
  switch (name) {
    case 'none':
    case 'ok':
      return { kind: 'none' }
    case 'slow':
      return { kind: 'slow', ms: n ?? DEFAULT_SLOW_MS }
    case 'break-after':
    case 'error-after':
    case 'abort-after':
      return n === undefined ? null : { kind: name, chunks: n }
    case 'stall':
    case 'status-500':
    case 'status-429':
    case 'garbage':
    case 'bad-tool-args':
    case 'empty-tool-name':
    case 'refuse-connections':
    case 'refuse-in-stream':
      return arg === undefined ? { kind: name } : null
    default:
      return null
  }
}

export function faultName(f: Fault): string {
  if (f.kind === 'slow') return `slow:${f.ms}`
  if (f.kind === 'break-after' || f.kind === 'error-after' || f.kind === 'abort-after') return `${f.kind}:${f.chunks}`
  return f.kind
}
