import { createServer, type AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { SimulatedProvider } from '../src/providers/simulated/server.js'
import { P, chat, startMarket } from './helpers/market.js'

/** A port nothing listens on now. */
async function closedPort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const { port } = s.address() as AddressInfo
  await new Promise((resolve) => s.close(resolve))
  return port
}

describe('a provider that cannot be reached', () => {
  it('is logged once at start and once when it is back, and the 503 says it is unreachable, not busy', async () => {
    const port = await closedPort()
    const lines: string[] = []
    const m = await startMarket({
      log: (msg) => void lines.push(msg),
      edit: (c) => void (c.providers.find((p) => p.address === P.tern)!.baseUrl = `http://127.0.0.1:${port}/v1`),
    })
    let back: SimulatedProvider | undefined
    try {
      const down = () => lines.filter((l) => l.includes(`provider ${P.tern}: cannot be reached`))
      // The start's probe tells it; a loaded machine may take more than the poll's default second to get there.
      await expect.poll(() => down().length, { timeout: 10_000 }).toBe(1)
      expect(down()[0]).toContain('ECONNREFUSED')
      const msgs = [{ role: 'user', content: 'hi' }]
      for (let i = 0; i < 4; i++) {
        const res = await chat(m.url, m.key, { model: 'svc/tern@2', messages: msgs, max_tokens: 8 })
        expect(res.status).toBe(503)
        const { error } = await res.json()
        expect(error.code).toBe('no_capacity')
        expect(error.message).toMatch(
          /can be reached \(upstream connection failed: ECONNREFUSED\): they are unreachable, not busy/,
        )
      }
      // Every failed attempt and the start's probe found it down: told once.
      expect(down()).toHaveLength(1)
      back = await SimulatedProvider.start({ port })
      await expect
        .poll(
          async () => {
            const res = await chat(m.url, m.key, { model: 'svc/tern@2', messages: msgs, max_tokens: 8 })
            return res.status
          },
          { timeout: 10_000, interval: 500 },
        )
        .toBe(200)
      expect(lines.filter((l) => l.includes(`provider ${P.tern}: reachable again`))).toHaveLength(1)
    } finally {
      await m.close()
      await back?.close()
    }
  })

  it('busy providers are still told as busy', async () => {
    const m = await startMarket({ tuning: { breakerFailures: 1 } })
    try {
      m.sims.tern.setFault({ kind: 'status-500' })
      const res = await chat(m.url, m.key, {
        model: 'svc/tern@2',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 8,
      })
      expect(res.status).toBe(503)
      expect((await res.json()).error.message).toMatch(/can take the request now/)
    } finally {
      await m.close()
    }
  })
})
