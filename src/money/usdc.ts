/** USDC amounts: bigint base units with 6 decimals. Never floats. */
export const USDC_DECIMALS = 6
const UNIT = 1_000_000n
const PER_MTOK = 1_000_000n

const DECIMAL = /^(\d+)(?:\.(\d{1,6}))?$/

/**
 * Parses a decimal USDC string ("12.5") into base units; null when it is not a non-negative amount with ≤ 6 decimals.
 */
export function parseUsdc(text: string): bigint | null {
  const m = DECIMAL.exec(text.trim())
  if (!m) return null
  const whole = BigInt(m[1]!)
  const frac = BigInt((m[2] ?? '').padEnd(USDC_DECIMALS, '0'))
  return whole * UNIT + frac
}

/** Formats base units as a decimal string with exactly 6 decimals: 1234n → "0.001234". */
export function formatUsdc(units: bigint): string {
  const negative = units < 0n
  const abs = negative ? -units : units
  const whole = abs / UNIT
  const frac = (abs % UNIT).toString().padStart(USDC_DECIMALS, '0')
  return `${negative ? '-' : ''}${whole}.${frac}`
}

/** Parses an integer string of base units ("150000") as used for prices per million tokens. */
export function parseUnits(text: string): bigint | null {
  return /^\d+$/.test(text) ? BigInt(text) : null
}

export interface Prices {
  /** Base units per million input tokens. */
  input: bigint
  /** Base units per million output tokens. */
  output: bigint
}

/** Price of a request: ceil((prompt × input + completion × output) / 1e6), in base units. */
export function priceOf(prices: Prices, promptTokens: number, completionTokens: number): bigint {
  const micro = BigInt(promptTokens) * prices.input + BigInt(completionTokens) * prices.output
  return (micro + PER_MTOK - 1n) / PER_MTOK
}

/** Splits a charge into the provider's payout and the marketplace fee (fee rounds down, in the provider's favour). */
export function splitFee(cost: bigint, feeBps: number): { payout: bigint; fee: bigint } {
  const fee = (cost * BigInt(feeBps)) / 10_000n
  return { payout: cost - fee, fee }
}

export function maxBig(a: bigint, b: bigint): bigint {
  return a > b ? a : b
}

export function minBig(a: bigint, b: bigint): bigint {
  return a < b ? a : b
}
