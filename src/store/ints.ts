/** Integer columns arrive as bigint (SQLite safe integers, Postgres int8 parser) or number; normalize. */
export function num(v: unknown): number {
  return typeof v === 'number' ? v : Number(v)
}

export function big(v: unknown): bigint {
  return typeof v === 'bigint' ? v : BigInt(v as string | number)
}

export function bigOrNull(v: unknown): bigint | null {
  return v === null || v === undefined ? null : big(v)
}

export function numOrNull(v: unknown): number | null {
  return v === null || v === undefined ? null : num(v)
}
