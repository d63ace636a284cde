import { describe, expect, it } from 'vitest'
import { startMarket } from './helpers/market.js'
import { DATABASE_URL, postgresReachable } from './helpers/stores.js'
import { tcpProxy } from './helpers/tcp-proxy.js'

describe('/readyz and a Postgres store that stops answering', () => {
  it('is 503 naming the store while it cannot be reached, and 200 again once it can', async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    const db = new URL(DATABASE_URL)
    const proxy = await tcpProxy(db.hostname, Number(db.port || 5432))
    const mk = await startMarket({
      store: 'postgres',
      reach: (url) => Object.assign(new URL(url), { host: `127.0.0.1:${proxy.port}` }).toString(),
    })
    try {
      expect((await fetch(`${mk.url}/readyz`)).status).toBe(200)
      await proxy.cut()
      const down = await fetch(`${mk.url}/readyz`)
      expect(down.status).toBe(503)
      expect((await down.json()).problems[0]).toMatch(/^the store does not answer: /)
      // The gateway itself still answers.
      expect((await fetch(`${mk.url}/healthz`)).status).toBe(200)
      await proxy.restore()
      await expect.poll(async () => (await fetch(`${mk.url}/readyz`)).status, { timeout: 10_000 }).toBe(200)
    } finally {
      await proxy.restore()
      await mk.close()
      await proxy.close()
    }
  })
})
