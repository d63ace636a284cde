import { sql } from 'kysely'
import { statSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { chat, startMarket } from './helpers/market.js'

const msgs = [{ role: 'user', content: 'hi' }]

describe('refusals before admission', () => {
  it('are counted per key, model, code and minute, and GET /v1/usage/refusals reports them', async () => {
    // A clock whose minute starts with the test: its refusals are counted in one minute.
    const shift = Date.now() % 60_000
    const m = await startMarket({ funds: 1_000n, now: () => Date.now() - shift })
    try {
      for (let i = 0; i < 3; i++) {
        expect((await chat(m.url, m.key, { model: 'svc/atlas@1', messages: msgs, max_tokens: 4000 })).status).toBe(402)
      }
      for (const sim of [m.sims.atlasCheap, m.sims.atlasDear]) sim.setFault({ kind: 'status-500' })
      // Three failures open both breakers: then the plan has no offer, refused before admission.
      for (let i = 0; i < 8; i++) await chat(m.url, m.key, { model: 'svc/atlas@1', messages: msgs, max_tokens: 4 })
      const headers = { authorization: `Bearer ${m.key}` }
      await expect
        .poll(async () => {
          const res = await fetch(`${m.url}/v1/usage/refusals`, { headers })
          const { data } = await res.json()
          return data.map((d: { code: string; count: number }) => `${d.code}:${d.count}`).sort()
        })
        .toEqual(expect.arrayContaining(['insufficient_quota:3']))
      const { data } = await (await fetch(`${m.url}/v1/usage/refusals`, { headers })).json()
      const quota = data.find((d: { code: string }) => d.code === 'insufficient_quota')
      expect(quota).toMatchObject({ model: 'svc/atlas@1', count: 3, object: 'usage.refusals' })
      expect(quota.minute % 60).toBe(0)
      // No record each: the usage list holds none of them.
      const records = await m.store.usage.list(m.accountId, { limit: 50 })
      expect(records.filter((r) => r.outcome === 'insufficient_quota')).toEqual([])
    } finally {
      await m.close()
    }
  })

  it('an outage with clients retrying at full speed grows the store by far less than a row each', async () => {
    const m = await startMarket({ tuning: { breakerFailures: 1, breakerCooldownMs: 60_000 } })
    try {
      for (const sim of Object.values(m.sims)) sim.setFault({ kind: 'status-500' })
      const file = m.config.store.slice('sqlite:'.length)
      const size = () => statSync(file).size + statSync(`${file}-wal`, { throwIfNoEntry: false })!.size
      await chat(m.url, m.key, { model: 'svc/atlas@1', messages: msgs, max_tokens: 4 })
      await chat(m.url, m.key, { model: 'svc/atlas@1', messages: msgs, max_tokens: 4 })
      await m.server.gateway.refusals.flush()
      // The pages the store's creation left in the WAL, copied into the file now, not during the measure.
      await sql`PRAGMA wal_checkpoint(TRUNCATE)`.execute(m.store.db)
      const before = size()
      // 8 clients, 80 retries each: a fixed count, so a slow machine sends as many as a fast one.
      let refused = 0
      await Promise.all(
        [0, 1, 2, 3, 4, 5, 6, 7].map(async () => {
          for (let i = 0; i < 80; i++) {
            const res = await chat(m.url, m.key, { model: 'svc/atlas@1', messages: msgs, max_tokens: 4 })
            if (res.status === 503) refused++
            await res.arrayBuffer()
          }
        }),
      )
      await m.server.gateway.refusals.flush()
      expect(refused).toBe(640)
      // A record each would be ~200 bytes a refusal; counted, a few rows in all.
      expect(size() - before).toBeLessThan(64 * 1024)
    } finally {
      await m.close()
    }
  })
})
