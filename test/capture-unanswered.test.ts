import type pg from 'pg'
import { beforeAll, describe, expect, it } from 'vitest'
import { chat, marketPerTest, sseEvents, type Market } from './helpers/market.js'
import { postgresReachable } from './helpers/stores.js'
import { parseUsdc } from '../src/money/usdc.js'

const market = marketPerTest()
const FUNDS = 10_000_000n

/**
 * The store's pool, made to lose the answer of the next close of a hold: after its statement ran (it committed), or
 * before it was sent (it did not). The connection breaking at either point is what the gateway cannot tell apart.
 */
function loseNextClose(mk: Market, when: 'after' | 'before', closes = 1): void {
  const pool = (mk.store as unknown as { hot: { pool: pg.Pool } }).hot.pool
  const query = pool.query.bind(pool) as (config: unknown, values?: unknown) => Promise<unknown>
  let armed = closes
  pool.query = (async (config: unknown, values?: unknown) => {
    if (armed === 0 || (config as { name?: string })?.name !== 'svc_close') return query(config, values)
    armed--
    if (when === 'after') await query(config, values)
    throw new Error('Connection terminated unexpectedly')
  }) as typeof pool.query
}

const ask = (stream: boolean) => ({
  model: 'svc/atlas@1',
  messages: [{ role: 'user', content: 'hello' }],
  max_tokens: 20,
  stream,
})

describe('a capture whose answer the store lost, on postgres', () => {
  beforeAll(async (ctx) => {
    if (!(await postgresReachable())) ctx.skip()
  })

  // The release that follows may lose its answer too (the same broken connection): the record still tells.
  it.each([
    [false, 1],
    [true, 1],
    [false, 2],
    [true, 2],
  ])(
    'that had committed: the reply is delivered with the charge it made (stream %s, answers lost %i)',
    async (stream, lost) => {
      const mk = await market({ store: 'postgres' })
      loseNextClose(mk, 'after', lost)
      const res = await chat(mk.url, mk.key, ask(stream))
      expect(res.status).toBe(200)
      let svc: { cost_usdc: string; request_id: string }
      if (stream) {
        const events = await sseEvents(res)
        expect(events.at(-1)).toBe('[DONE]')
        const chunks = events.slice(0, -1).map((e) => JSON.parse(e))
        expect(chunks.some((c) => c.error)).toBe(false)
        expect(chunks.at(-3).choices[0].finish_reason).toBe('stop')
        svc = chunks.at(-1).svc
      } else {
        const body = await res.json()
        expect(body.choices[0].message.content.length).toBeGreaterThan(0)
        svc = body.svc
      }
      const record = (await mk.store.usage.get(mk.accountId, svc.request_id))!
      expect(record).toMatchObject({ outcome: 'completed' })
      expect(record.cost).toBeGreaterThan(0n)
      expect(parseUsdc(svc.cost_usdc)).toBe(record.cost)
      expect((await mk.store.accounts.byId(mk.accountId))!).toMatchObject({ balance: FUNDS - record.cost, held: 0n })
      expect((await mk.store.ledger.audit()).unbalanced).toEqual([])
    },
  )

  it.each([false, true])('that had not: an error, and nothing charged (stream %s)', async (stream) => {
    const mk = await market({ store: 'postgres' })
    loseNextClose(mk, 'before')
    const res = await chat(mk.url, mk.key, ask(stream))
    const requestId = res.headers.get('x-request-id')!
    if (stream) {
      // The content went out before the capture: the stream ends with the error chunk.
      const events = await sseEvents(res)
      expect(JSON.parse(events.at(-2)!).error).toMatchObject({ code: 'stream_interrupted' })
    } else {
      expect(res.status).toBe(503)
      expect((await res.json()).error.code).toBe('no_capacity')
    }
    expect((await mk.store.usage.get(mk.accountId, requestId))!).toMatchObject({ cost: 0n })
    expect((await mk.store.accounts.byId(mk.accountId))!).toMatchObject({ balance: FUNDS, held: 0n })
    expect((await mk.store.ledger.audit()).unbalanced).toEqual([])
  })
})
