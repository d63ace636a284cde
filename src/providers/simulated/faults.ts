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
  | Cheat
  /** Cheats (as `cheat` says) on `percent` % of requests, evenly spread, and serves the others honestly. */
  | { kind: 'sometimes'; percent: number; cheat: Cheat }

/** A provider that cheats its payers (cheats.ts): each is what the marketplace's checks and audits must catch. */
export type Cheat =
  /** Another, smaller deterministic model serves: other tokens and log probabilities. */
  | { kind: 'substitute' }
  /** The same tokens, with every log probability `milli` thousandths of a nat lower, as far lower precision gives. */
  | { kind: 'quantized'; milli: number }
  /** Reports `percent` % more output tokens than it sent. */
  | { kind: 'inflate'; percent: number }
  /** Stops after `tokens` output tokens and says `stop`, as if the reply were whole. */
  | { kind: 'truncate'; tokens: number }

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
  'substitute',
  'quantized[:MILLI]',
  'inflate[:PERCENT]',
  'truncate[:TOKENS]',
  'sometimes:PERCENT:<cheat>',
]

const DEFAULT_QUANTIZED_MILLI = 300
const DEFAULT_INFLATE_PERCENT = 50
const DEFAULT_TRUNCATE_TOKENS = 3

const DEFAULT_SLOW_MS = 30_000

/** Parses `slow`, `slow:500`, `break-after:3`, …; null when the text names no mode. */
export function parseFault(text: string): Fault | null {
  if (text.startsWith('sometimes:')) {
    const [, share, ...rest] = text.split(':')
    const percent = Number(share)
    const cheat = parseFault(rest.join(':'))
    if (!Number.isInteger(percent) || percent < 0 || percent > 100 || !cheat || !isCheat(cheat)) return null
    return { kind: 'sometimes', percent, cheat }
  }
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
    case 'quantized':
      return { kind: name, milli: n ?? DEFAULT_QUANTIZED_MILLI }
    case 'inflate':
      return { kind: name, percent: n ?? DEFAULT_INFLATE_PERCENT }
    case 'truncate':
      return { kind: name, tokens: n ?? DEFAULT_TRUNCATE_TOKENS }
    case 'substitute':
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

const CHEATS: readonly string[] = ['substitute', 'quantized', 'inflate', 'truncate']

export function isCheat(f: Fault): f is Cheat {
  return CHEATS.includes(f.kind)
}

export function faultName(f: Fault): string {
  if (f.kind === 'slow') return `slow:${f.ms}`
  if (f.kind === 'quantized') return `quantized:${f.milli}`
  if (f.kind === 'inflate') return `inflate:${f.percent}`
  if (f.kind === 'truncate') return `truncate:${f.tokens}`
  if (f.kind === 'sometimes') return `sometimes:${f.percent}:${faultName(f.cheat)}`
  if (f.kind === 'break-after' || f.kind === 'error-after' || f.kind === 'abort-after') return `${f.kind}:${f.chunks}`
  return f.kind
}
