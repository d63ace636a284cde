import { InvalidArgumentError, type Command } from 'commander'
import { NO_LIMITS, type KeyLimits } from '../../limits/limits.js'
import { formatUsdc, parseUsdc } from '../../money/usdc.js'
export { limitsView } from '../../usage/key-limits.js'
import { LIMIT_RESETS, type LimitReset } from '../../limits/period.js'
import { OperationError } from '../../accounts/operations.js'

/** The limit options of `svc key create` and `svc key update`, as commander parses them. */
export interface LimitOptions {
  rpm?: number | 'none'
  tpm?: number | 'none'
  limit?: bigint | 'none'
  limitReset?: LimitReset
}

/** A rate option's value: a whole number, or `none`. */
function rate(name: string) {
  return (text: string): number | 'none' => {
    if (text === 'none') return 'none'
    if (!/^\d+$/.test(text)) throw new InvalidArgumentError(`${name} takes a whole number of a minute, or none`)
    return Number(text)
  }
}

function usdc(text: string): bigint | 'none' {
  if (text === 'none') return 'none'
  const units = parseUsdc(text)
  if (units === null) throw new InvalidArgumentError('--limit takes USDC with at most 6 decimals (2.5), or none')
  return units
}

function reset(text: string): LimitReset {
  if (!(LIMIT_RESETS as readonly string[]).includes(text))
    throw new InvalidArgumentError(`--limit-reset takes one of ${LIMIT_RESETS.join(', ')}`)
  return text as LimitReset
}

/** Adds the options --rpm, --tpm, --limit and --limit-reset. */
export function withLimits(c: Command): Command {
  return c
    .option('--rpm <n>', 'requests a minute the key may make (none: no limit)', rate('--rpm'))
    .option('--tpm <n>', 'tokens a minute (prompt and max_tokens when admitted, as billed once done)', rate('--tpm'))
    .option('--limit <usdc>', 'USDC the key may spend in a period (none: no limit)', usdc)
    .option('--limit-reset <period>', `when the spend limit starts over, UTC: ${LIMIT_RESETS.join('|')}`, reset)
}

/** A limit as given (`none`: no limit), else `current`. */
const given = <T>(v: T | 'none' | undefined, current: T | null): T | null =>
  v === undefined ? current : v === 'none' ? null : v

/** The limits the options give, the rest as `current`. A reset needs a spend limit, given or current. */
export function limitsOf(opts: LimitOptions, current: KeyLimits = NO_LIMITS): KeyLimits {
  const limit = given(opts.limit, current.spend?.limit ?? null)
  if (limit === null && opts.limitReset !== undefined)
    throw new OperationError('--limit-reset needs a spend limit: give --limit too')
  return {
    rpm: given(opts.rpm, current.rpm),
    tpm: given(opts.tpm, current.tpm),
    spend: limit === null ? null : { limit, reset: opts.limitReset ?? current.spend?.reset ?? 'none' },
  }
}

const shown = (v: number | null) => (v === null ? 'none' : String(v))

/** A key's limits in a line of text. */
export function limitsLine(l: KeyLimits): string {
  const spend = l.spend ? `${formatUsdc(l.spend.limit)} USDC (reset ${l.spend.reset})` : 'none'
  return `rpm ${shown(l.rpm)}, tpm ${shown(l.tpm)}, spend limit ${spend}`
}
