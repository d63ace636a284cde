import { Pool } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Cancel } from './cancel.js'
import { OpenAICompatibleProvider } from './openai-compatible.js'
import { SimulatedProvider } from './simulated/server.js'
import type { UpstreamEvent } from './types.js'

// llama.cpp's server answers `Keep-Alive` but closes the connection right after a streamed reply; the simulated one
// does so too, and here keeps the connection for 50 ms first, so that the next request always reaches it closing.
let sim: SimulatedProvider
beforeAll(async () => {
  sim = await SimulatedProvider.start({ dialect: 'llamacpp', closeAfterStreamMs: 50, replyTokens: 4 })
})
afterAll(() => sim.close())

const TIMEOUTS = { firstByteTimeoutMs: 5000, replyTimeoutMs: 5000, idleTimeoutMs: 5000 }
const body = (stream: boolean) => ({ bodyJson: '{"messages":[{"role":"user","content":"hi"}]}', stream })

async function served(provider: OpenAICompatibleProvider, stream: boolean): Promise<UpstreamEvent[]> {
  const out: UpstreamEvent[] = []
  for await (const events of provider.stream('m', body(stream), new Cancel())) out.push(...events)
  return out
}

describe('a connection the engine closed after a streamed reply', () => {
  it('fails the next request sent on it, without the retry (the simulation reproduces the race)', async () => {
    const pool = new Pool(sim.url.replace(/\/v1$/, ''), { connections: 1, pipelining: 1 })
    let failed = 0
    try {
      for (let i = 0; i < 10; i++) {
        try {
          const res = await pool.request({
            path: '/v1/chat/completions',
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
          })
          await res.body.text()
        } catch (err) {
          expect((err as { code?: string }).code).toBe('UND_ERR_SOCKET')
          failed++
        }
      }
    } finally {
      await pool.close()
    }
    expect(failed).toBeGreaterThanOrEqual(4)
  })

  it('is retried once on a fresh connection: 100 streamed and plain requests in turn on one connection, none failed', async () => {
    const provider = new OpenAICompatibleProvider(sim.url, undefined, TIMEOUTS, { connections: 1 })
    const before = sim.stats.requests
    const texts = new Set<string>()
    try {
      for (let i = 0; i < 100; i++) {
        const events = await served(provider, i % 3 !== 2)
        expect(events.filter((e) => e.type === 'failure')).toEqual([])
        expect(events.some((e) => e.type === 'finish')).toBe(true)
        texts.add(events.map((e) => (e.type === 'content' ? e.text : '')).join(''))
      }
    } finally {
      await provider.close()
    }
    // The same request, the same reply, whole every time.
    expect([...texts]).toHaveLength(1)
    expect([...texts][0]!.split(' ')).toHaveLength(4)
    // Each reply was generated once: a request the engine dropped was never served.
    expect(sim.stats.requests - before).toBe(100)
  })
})
