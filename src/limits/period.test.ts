import { describe, expect, it } from 'vitest'
import { periodEnd, periodStart, spentNow } from './period.js'

const at = (iso: string) => Date.parse(iso)

describe('spend limit periods (UTC)', () => {
  it('starts a day at midnight, a week on Monday and a month on its first day', () => {
    const now = at('2026-11-29T17:45:00Z') // a Sunday
    expect(periodStart('none', now)).toBe(0)
    expect(periodEnd('none', now)).toBeNull()
    expect(periodStart('daily', now)).toBe(at('2026-11-29T00:00:00Z'))
    expect(periodEnd('daily', now)).toBe(at('2026-11-30T00:00:00Z'))
    expect(periodStart('weekly', now)).toBe(at('2026-11-23T00:00:00Z'))
    expect(periodEnd('weekly', now)).toBe(at('2026-11-30T00:00:00Z'))
    expect(periodStart('weekly', at('2026-11-30T00:00:00Z'))).toBe(at('2026-11-30T00:00:00Z'))
    expect(periodStart('monthly', now)).toBe(at('2026-11-01T00:00:00Z'))
    expect(periodEnd('monthly', at('2026-12-31T23:59:59Z'))).toBe(at('2027-01-01T00:00:00Z'))
  })

  it('counts what was spent only in the period it was spent in', () => {
    const k = { reset: 'daily' as const, periodStart: at('2026-11-29T00:00:00Z'), periodSpent: 7n }
    expect(spentNow(k, at('2026-11-29T23:59:59Z'))).toBe(7n)
    expect(spentNow(k, at('2026-11-30T00:00:00Z'))).toBe(0n)
    expect(spentNow({ ...k, reset: 'none', periodStart: 0 }, at('2030-01-01T00:00:00Z'))).toBe(7n)
  })
})
