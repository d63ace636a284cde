import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type RunningServer } from '../src/server.js'
import { openStore } from '../src/store/open.js'
import type { Store } from '../src/store/store.js'
import { issueKey } from '../src/accounts/operations.js'
import { chat, startMarket, type Market } from './helpers/market.js'
import { postgresReachable } from './helpers/stores.js'
import { expectError } from './helpers/errors.js'

const REDIS = 'redis://127.0.0.1:6379'
const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }

/** Whether Redis answers at REDIS. */
async function redisReachable(): Promise<boolean> {
  const { Redis } = await import('ioredis')
  const r = new Redis(REDIS, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 500 })
  r.on('error', () => {})
  try {
    await r.connect()
    return (await r.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    r.disconnect()
  }
}

// On SQLite the store's counts are taken in each request's hold transaction (`HotLedger.countsRates`).
describe.each([
  ['redis', 'postgres'],
  ['store', 'postgres'],
  ['store', 'sqlite'],
] as const)('per-key rate limits counted in the %s, two gateways on one %s store', (counter, kind) => {
  let m: Market
  let store2: Store
  let second: RunningServer
  let clock = Date.UTC(2026, 10, 28, 12, 0, 10)
  const now = () => clock
  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    if (counter === 'redis' && !(await redisReachable())) return ctx.skip()
    const edit = (c: Market['config']) => void (counter === 'redis' && (c.limits = { redis: REDIS }))
    m = await startMarket({ store: kind, now, edit })
    store2 = await openStore(m.config.store)
    second = await startServer(
      { ...m.config, listen: { host: '127.0.0.1', port: 0 } },
      { store: store2, now, log: () => {} },
    )
  })
  afterAll(async () => {
    await second?.close()
    await store2?.close()
    await m?.close()
  })

  it('admits exactly 10 of 30 requests at once through both, refuses 20 with 429 and the headers, then admits again', async () => {
    const { key } = await issueKey({
      now: clock,
      store: m.store,
      accountId: m.accountId,
      name: 'ci',
      limits: { rpm: 10, tpm: null },
    })
    const replies = await Promise.all(Array.from({ length: 30 }, (_, i) => chat(i % 2 ? m.url : second.url, key, body)))
    const ok = replies.filter((r) => r.status === 200)
    const refused = replies.filter((r) => r.status === 429)
    expect(ok).toHaveLength(10)
    expect(refused).toHaveLength(20)
    for (const r of refused) {
      expect(r.headers.get('x-ratelimit-limit-requests')).toBe('10')
      expect(r.headers.get('x-ratelimit-remaining-requests')).toBe('0')
      expect(r.headers.get('x-ratelimit-reset-requests')).toBe('50s')
      expect(r.headers.get('retry-after')).toBe('50')
      const e = await expectError(r, 429, 'rate_limit_exceeded', null)
      expect(e.message).toMatch(/10 requests a minute/)
    }
    for (const r of ok) {
      expect(r.headers.get('x-ratelimit-limit-requests')).toBe('10')
      expect(Number(r.headers.get('x-ratelimit-remaining-requests'))).toBeLessThan(10)
      await r.json()
    }
    // Nothing refused was charged or recorded.
    expect(await m.store.usage.list(m.accountId, { limit: 50 })).toHaveLength(10)
    clock += 60_000
    const next = await chat(second.url, key, body)
    expect(next.status).toBe(200)
    expect(next.headers.get('x-ratelimit-remaining-requests')).toBe('9')
    await next.json()
    // What the key used this minute, beside the account's other keys.
    const auth = { authorization: `Bearer ${key}` }
    const limits = await (await fetch(`${second.url}/v1/usage/keys`, { headers: auth })).json()
    const mine = limits.data.find((k: { rpm: number | null }) => k.rpm === 10)
    expect(mine).toMatchObject({ rpm: 10, tpm: null, this_minute: { requests: 1, tokens: expect.any(Number) } })
    expect(mine.this_minute.resets_at).toBe((Math.floor(clock / 60_000) + 1) * 60)
    expect(limits.data.find((k: { rpm: number | null }) => k.rpm === null)).toMatchObject({ this_minute: null })
  })

  it('counts tokens at their maximum when admitted and as billed once done, streamed too', async () => {
    const { key } = await issueKey({
      now: clock,
      store: m.store,
      accountId: m.accountId,
      name: 'tpm',
      limits: { rpm: null, tpm: 400 },
    })
    // Counted at 300 and the prompt when admitted; billed far less (the simulated reply is short).
    const first = await chat(m.url, key, { ...body, max_tokens: 300, stream: true })
    expect(first.status).toBe(200)
    expect(first.headers.get('x-ratelimit-limit-tokens')).toBe('400')
    expect(first.headers.get('x-ratelimit-limit-requests')).toBeNull()
    await first.text()
    // Too large for the minute's limit whatever was used: refused without counting.
    const huge = await chat(second.url, key, { ...body, max_tokens: 500 })
    expect((await expectError(huge, 429, 'rate_limit_exceeded', null)).message).toMatch(/may take/)
    // Admitted: the first request's count fell from its maximum to what it was billed before its reply was sent.
    const again = await chat(m.url, key, { ...body, max_tokens: 300 })
    expect(again.status).toBe(200)
    await again.arrayBuffer()
    const used = (await m.store.usage.list(m.accountId, { limit: 1 }))[0]!
    expect(used.promptTokens + used.completionTokens).toBeLessThan(100)
  })

  it("corrects each capture's count before its reply: a request the correction makes room for is admitted at once", async () => {
    for (let run = 0; run < 10; run++) {
      const { key } = await issueKey({
        now: clock,
        store: m.store,
        accountId: m.accountId,
        name: `tpm-${run}`,
        limits: { rpm: null, tpm: 1200 },
      })
      // Two counted at their maximum fit the minute; a third fits only once their counts fell to what they used.
      for (const stream of [false, true]) {
        const res = await chat(m.url, key, { ...body, max_tokens: 500, stream })
        expect(res.status).toBe(200)
        await res.text()
      }
      const third = await chat(second.url, key, { ...body, max_tokens: 500 })
      expect(third.status, await third.clone().text()).toBe(200)
      await third.json()
    }
  })

  it('counts a request whose maximum cost no account could pay, and answers its 402 with the headers', async () => {
    const { key } = await issueKey({
      now: clock,
      store: m.store,
      accountId: m.accountId,
      name: 'huge',
      limits: { rpm: 5, tpm: null },
    })
    const remaining: (string | null)[] = []
    for (const max_tokens of [1e18, 1e300]) {
      const res = await chat(m.url, key, { model: 'svc/cortex@1', messages: body.messages, max_tokens })
      remaining.push(res.headers.get('x-ratelimit-remaining-requests'))
      expect((await expectError(res, 402, 'insufficient_quota', null)).message).toMatch(/Nothing was charged/)
    }
    const next = await chat(second.url, key, body)
    expect(next.status).toBe(200)
    remaining.push(next.headers.get('x-ratelimit-remaining-requests'))
    await next.json()
    expect(remaining).toEqual(['4', '3', '2'])
  })

  it('sends no rate headers for a key without limits', async () => {
    const res = await chat(m.url, m.key, body)
    expect(res.status).toBe(200)
    expect(res.headers.get('x-ratelimit-limit-requests')).toBeNull()
    await res.json()
  })
})

describe.each(['open', 'closed'] as const)('a Redis that does not answer, onRedisDown %s', (policy) => {
  it(
    policy === 'open'
      ? 'admits without the rate check, logs it and counts it'
      : 'refuses with 503, logs it and counts it',
    async () => {
      const logged: string[] = []
      const m = await startMarket({
        log: (msg) => logged.push(msg),
        edit: (c) =>
          void ((c.limits = { redis: 'redis://127.0.0.1:1', onRedisDown: policy }), (c.metrics = { port: 0 })),
      })
      try {
        const { key } = await issueKey({
          now: Date.now(),
          store: m.store,
          accountId: m.accountId,
          name: 'k',
          limits: { rpm: 1, tpm: null },
        })
        for (let i = 0; i < 2; i++) {
          const res = await chat(m.url, key, body)
          if (policy === 'open') expect(res.status).toBe(200)
          else
            expect((await expectError(res, 503, 'no_capacity', null)).message).toMatch(/rate limits cannot be checked/)
          expect(res.headers.get('x-ratelimit-limit-requests')).toBeNull()
          if (!res.bodyUsed) await res.arrayBuffer()
        }
        expect(logged.filter((l) => l.startsWith('rate limits: the counter does not answer'))).toHaveLength(1)
        const metrics = await (await fetch(m.server.metricsUrl!)).text()
        expect(metrics).toContain(`svc_rate_limits_unchecked_total{policy="${policy}"} 2`)
      } finally {
        await m.close()
      }
    },
  )
})
