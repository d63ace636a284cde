import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Cancel } from './cancel.js'
import { OpenAICompatibleProvider } from './openai-compatible.js'
import type { UpstreamEvent } from './types.js'

// The adapter's bounds: a reply without end and a stream's time budgets (openai-compatible.test.ts: what it reads).
/** One SSE chunk of a stream, with `delta`'s fields and a finish reason. */
const chunk = (delta: string, finish = 'null') =>
  `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{${delta}},"finish_reason":${finish}}]}\n\n`

describe('the OpenAI-compatible adapter facing a reply without end', () => {
  let huge: Server
  let url: string
  beforeAll(async () => {
    huge = createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        const stream = req.url === '/stream/chat/completions'
        // '/json-to-stream' is asked for a stream and answers plain JSON, without end.
        res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json' })
        // 17 MiB in 1 MiB writes: one JSON string, or one event's data line that never ends.
        const piece = 'x'.repeat(1024 * 1024)
        res.write(stream ? `data: {"choices":[{"index":0,"delta":{"content":"` : '{"choices":[{"message":{"content":"')
        let sent = 0
        const more = () => {
          while (sent < 17 && res.write(piece)) sent++
          if (sent < 17)
            res.once('drain', () => {
              sent++
              more()
            })
          else res.end('"}}]}')
        }
        more()
      })
    })
    await new Promise<void>((resolve) => huge.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(huge.address() as AddressInfo).port}`
  })
  afterAll(
    () =>
      new Promise<void>((resolve) => {
        huge.closeAllConnections()
        huge.close(() => resolve())
      }),
  )

  async function read(path: string, stream: boolean): Promise<UpstreamEvent[]> {
    const provider = new OpenAICompatibleProvider(`${url}/${path}`, undefined, {
      firstByteTimeoutMs: 5000,
      replyTimeoutMs: 5000,
      idleTimeoutMs: 5000,
    })
    const out: UpstreamEvent[] = []
    try {
      for await (const events of provider.stream('m', { bodyJson: '{}', stream }, new Cancel())) out.push(...events)
    } finally {
      await provider.close()
    }
    return out
  }

  it('drops a plain reply past 16 MiB as invalid output', async () => {
    expect(await read('plain', false)).toEqual([
      { type: 'failure', failure: { kind: 'invalid_output', detail: 'reply larger than 16 MiB' } },
    ])
  })

  it('ends a stream whose event passes 16 MiB as invalid output', async () => {
    expect(await read('stream', true)).toEqual([
      { type: 'failure', failure: { kind: 'invalid_output', detail: 'stream event larger than 16 MiB' } },
    ])
  })

  it('drops a plain reply past 16 MiB to a stream request as invalid output', async () => {
    expect(await read('json-to-stream', true)).toEqual([
      { type: 'failure', failure: { kind: 'invalid_output', detail: 'reply larger than 16 MiB' } },
    ])
  })
})

/** Where a stream ends, and how long an attempt may wait: never for ever, never past a whole reply. */
describe('the OpenAI-compatible adapter timing a stream', () => {
  let upstream: Server
  let url: string
  const open = new Set<import('node:http').ServerResponse>()
  beforeAll(async () => {
    upstream = createServer((req, res) => {
      req.resume()
      open.add(res)
      res.on('close', () => open.delete(res))
      const route = req.url?.split('/')[1]
      if (route === 'never') return
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(chunk('"content":"a"'))
      if (route === 'done-then-hang') return void res.write(chunk('', '"stop"') + 'data: [DONE]\n\n')
      if (route === 'finish-then-reset')
        return void res.write(chunk('', '"stop"'), () => setTimeout(() => res.socket?.destroy(), 50))
      // The one connection of a pool of one kept busy: an event every 100 ms, for as long as the client stays.
      if (route === 'events-forever') {
        const tick = setInterval(() => res.write(chunk('"content":"a"')), 100)
        return void res.on('close', () => clearInterval(tick))
      }
      if (route === 'ping-forever') {
        const ping = setInterval(() => res.write(': ping\n\n' + chunk('"content":""')), 100)
        res.on('close', () => clearInterval(ping))
      }
      // Events that add nothing to the reply: usage alone, a finish reason again, a call's id and name again.
      if (route === 'nothing-new-forever') {
        const usage = `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } })}\n\n`
        const again = chunk('"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f"}}]')
        const ping = setInterval(() => res.write(usage + again), 100)
        res.on('close', () => clearInterval(ping))
      }
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
  })
  afterAll(
    () =>
      new Promise<void>((resolve) => {
        upstream.closeAllConnections()
        upstream.close(() => resolve())
      }),
  )

  async function timed(
    provider: OpenAICompatibleProvider,
    stream = true,
    cancel = new Cancel(),
  ): Promise<{ events: UpstreamEvent[]; ms: number }> {
    const started = performance.now()
    const events: UpstreamEvent[] = []
    for await (const batch of provider.stream('m', { bodyJson: '{}', stream }, cancel)) events.push(...batch)
    return { events, ms: performance.now() - started }
  }
  const adapter = (path: string, ms: number, connections?: number) =>
    new OpenAICompatibleProvider(
      `${url}/${path}`,
      undefined,
      { firstByteTimeoutMs: ms, replyTimeoutMs: ms, idleTimeoutMs: ms },
      connections === undefined ? {} : { connections },
    )
  const content = { type: 'content', text: 'a' }
  const finish = { type: 'finish', reason: 'stop' }

  it('ends at [DONE], whatever the upstream then does with the connection', async () => {
    const provider = adapter('done-then-hang', 5_000)
    try {
      const { events, ms } = await timed(provider)
      expect(events).toEqual([content, finish])
      expect(ms).toBeLessThan(1_000)
    } finally {
      await provider.close()
    }
  })

  it('takes a reset after the finish reason as the end of a whole reply, not a failure', async () => {
    const provider = adapter('finish-then-reset', 5_000)
    try {
      expect((await timed(provider)).events).toEqual([content, finish])
    } finally {
      await provider.close()
    }
  })

  it('gives up on a stream that sends only pings and empty deltas after its first event', async () => {
    const provider = adapter('ping-forever', 400)
    try {
      const { events, ms } = await timed(provider)
      expect(events).toEqual([
        content,
        { type: 'failure', failure: { kind: 'unavailable', detail: 'nothing more of the reply within 400 ms' } },
      ])
      expect(ms).toBeLessThan(2_000)
    } finally {
      await provider.close()
    }
    await expect.poll(() => open.size).toBe(0)
  })

  it('gives up on a stream whose events after its first add nothing to the reply', async () => {
    const provider = adapter('nothing-new-forever', 400)
    try {
      const { events, ms } = await timed(provider)
      expect(events.at(-1)).toEqual({
        type: 'failure',
        failure: { kind: 'unavailable', detail: 'nothing more of the reply within 400 ms' },
      })
      expect(ms).toBeLessThan(2_000)
    } finally {
      await provider.close()
    }
    await expect.poll(() => open.size).toBe(0)
  })

  it.each([true, false])(
    'keeps its time budget and its client while queued for a connection (stream %s)',
    async (stream) => {
      // Budgets far above the upstream's 100 ms ticks, so a stall of a loaded machine cannot end the first request
      // early.
      const provider = adapter('events-forever', 1_500, 1)
      const busy = new Cancel()
      const first = timed(provider, true, busy)
      await expect.poll(() => open.size).toBe(1)
      try {
        // The one connection is taken: the second request waits for it, its budget running.
        const { events, ms } = await timed(provider, stream)
        expect(events).toEqual([
          {
            type: 'failure',
            failure: {
              kind: 'unavailable',
              detail: stream ? 'no first event within 1500 ms' : 'no reply within 1500 ms',
            },
          },
        ])
        expect(ms).toBeGreaterThanOrEqual(1_400)
        expect(ms).toBeLessThan(3_000)
        expect(open.size).toBe(1)
        const client = new Cancel()
        setTimeout(() => client.abort(), 50)
        const left = await timed(provider, stream, client)
        expect(left.events).toEqual([{ type: 'failure', failure: { kind: 'aborted', detail: 'the client went away' } }])
        expect(left.ms).toBeLessThan(800)
      } finally {
        busy.abort()
        await first
        await provider.close()
      }
    },
  )
})
