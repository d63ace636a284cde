/**
 * A count written in plain decimal digits, from 1 to `max`; null for anything else. `Number()` would also read
 * '0x10', ' 5', '1e1' and '1.0', which no one means as a count.
 */
export function countFrom(text: unknown, max: number): number | null {
  if (typeof text !== 'string' || !/^\d{1,9}$/.test(text)) return null
  const n = Number(text)
  return n >= 1 && n <= max ? n : null
}
