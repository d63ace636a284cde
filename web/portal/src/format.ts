import { formatUsdc } from '../../../src/money/usdc.js'

/** Display helpers; amounts arrive as decimal strings or base-unit strings, never floats. */

export const shortAddress = (a: string) => `${a.slice(0, 6)}…${a.slice(-4)}`

export function when(seconds: number | null): string {
  if (seconds === null) return 'never'
  return new Date(seconds * 1000).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })
}

/** Compact, to the second, for tables of requests; in the browser's zone, named (the chart's days are UTC). */
export const stamp = (seconds: number) =>
  new Date(seconds * 1000).toLocaleString(undefined, {
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    timeZoneName: 'short',
  })

/** `"0.001234"` → `"$0.001234"`; the six decimals stay, as on the API. */
export const usd = (decimal: string) => `$${decimal}`

/** A price in base units per million tokens as USDC per million tokens. */
export const perMtok = (units: string) => `$${formatUsdc(BigInt(units))} / Mtok`

export const count = (n: number) => n.toLocaleString('en-US')
