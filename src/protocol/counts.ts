/**
 * A count written in plain decimal digits, from `min` to `max`; null for anything else. `Number()` would also read
 * '0x10', ' 5', '1e1' and '1.0', which no one means as a count.
 */
export function countFrom(text: unknown, max: number, min = 1): number | null {
  if (typeof text !== 'string' || !/^\d{1,9}$/.test(text)) return null
  const n = Number(text)
  return n >= min && n <= max ? n : null
}
