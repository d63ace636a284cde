import { describe, expect, it } from 'vitest'
import { Health } from './health.js'

describe('Retry-After from the breakers', () => {
  const fail = (h: Health, key: string) => {
    expect(h.acquire(key, 10)).toBe(true)
    h.release(key, 'failure', 1)
  }

  it('is when the earliest open breaker half-opens, and now (1 s) while any offer is not open', () => {
    let now = 0
    const h = new Health({ failures: 1, cooldownMs: 5_000 }, () => now)
    expect(h.retryAfterSeconds(['a', 'b'])).toBe(1)
    fail(h, 'a')
    now = 1_000
    fail(h, 'b')
    // Both open: a half-opens at 5 s, b at 6 s.
    expect(h.retryAfterSeconds(['a', 'b'])).toBe(4)
    // An offer that never failed can be tried at once.
    expect(h.retryAfterSeconds(['a', 'b', 'c'])).toBe(1)
    now = 5_000
    expect(h.retryAfterSeconds(['a', 'b'])).toBe(1)
  })
})
