import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Cancel } from './cancel.js'
import { OpenAICompatibleProvider, requestBody } from './openai-compatible.js'
import type { UpstreamEvent } from './types.js'

const chunk = (delta: string, finish = 'null') =>
  `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{${delta}},"finish_reason":${finish}}]}\n\n`

/** Bodies sent in ONE write each: every event of the stream arrives in the same network read. */
const BODIES: Record<string, string> = {
  '/bad-in-the-middle/chat/completions':
    chunk('"content":"a"') + 'data: not json\n\n' + chunk('"content":"b"') + 'data: [DONE]\n\n',
  '/error-in-the-middle/chat/completions':
    chunk('"content":"a"') + 'data: {"error":{"message":"overloaded"}}\n\n' + chunk('"content":"b"'),
  '/finish-without-done/chat/completions': chunk('"content":"a"') + chunk('', '"stop"'),
  '/cut-short/chat/completions': chunk('"content":"a"') + chunk('"content":"b"'),
  '/byte-order-mark/chat/completions':
    '\uFEFF' + chunk('"content":"a"') + '\uFEFF' + chunk('"content":"b"') + 'data: [DONE]\n\n',
}

const SPLIT: Record<string, { status: number; body: string }> = {
  '/split-character/chat/completions': {
    status: 200,
    body: chunk('"content":"é 😀 ü"') + chunk('"content":"ß"') + 'data: [DONE]\n\n',
  },
  '/split-refusal/chat/completions': { status: 503, body: '{"error":{"message":"überlastet 😀 bitte später"}}' },
}

let server: Server
let base: string
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume()
    const split = SPLIT[req.url ?? '']
    if (split) {
      // Two network reads, the second beginning inside a character's UTF-8 bytes.
      res.writeHead(split.status, { 'content-type': split.status === 200 ? 'text/event-stream' : 'application/json' })
      const bytes = Buffer.from(split.body)
      const cut = bytes.indexOf(Buffer.from('😀')) + 2
      res.write(bytes.subarray(0, cut))
      return void setTimeout(() => res.end(bytes.subarray(cut)), 50)
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.end(BODIES[req.url ?? ''] ?? '')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

async function batches(path: string): Promise<UpstreamEvent[][]> {
  const provider = new OpenAICompatibleProvider(`${base}/${path}`, undefined, {
    firstByteTimeoutMs: 2000,
    replyTimeoutMs: 2000,
    idleTimeoutMs: 2000,
  })
  const out: UpstreamEvent[][] = []
  try {
    for await (const events of provider.stream('m', { bodyJson: '{}', stream: true }, new Cancel()))
      out.push([...events])
  } finally {
    await provider.close()
  }
  return out
}

describe('the upstream body', () => {
  it("carries the request's own max_tokens beside model and stream flags, the rest of the body as serialized", () => {
    const bodyJson = '{"messages":[{"role":"user","content":"hi"}],"temperature":0}'
    expect(JSON.parse(requestBody('up', { bodyJson, stream: true, maxTokens: 77 }))).toEqual({
      model: 'up',
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 77,
      messages: [{ role: 'user', content: 'hi' }],
      temperature: 0,
    })
    // Without a bound of its own, the body's (if any) stands: it is not written twice.
    expect(JSON.parse(requestBody('up', { bodyJson: '{"max_tokens":5}', stream: false }))).toEqual({
      model: 'up',
      stream: false,
      max_tokens: 5,
    })
    expect(requestBody('up', { bodyJson: '{}', stream: false, maxTokens: 3 })).toBe(
      '{"model":"up","stream":false,"max_tokens":3}',
    )
  })
})

/** The adapter yields the events of one network read together; a failure ends them, whatever follows in the read. */
describe('the OpenAI-compatible adapter reading a stream', () => {
  it('yields one batch per read, and nothing after a chunk that is not JSON', async () => {
    expect(await batches('bad-in-the-middle')).toEqual([
      [
        { type: 'content', text: 'a' },
        { type: 'failure', failure: { kind: 'invalid_output', detail: 'stream chunk is not JSON' } },
      ],
    ])
  })

  it('ends with an upstream error reported in the stream', async () => {
    const [first, ...rest] = await batches('error-in-the-middle')
    expect(rest).toEqual([])
    expect(first!.map((e) => e.type)).toEqual(['content', 'failure'])
    expect(first![1]).toMatchObject({
      failure: { kind: 'unavailable', detail: 'upstream error in stream: overloaded' },
    })
  })

  it('decodes a character whose bytes two network reads split', async () => {
    const read = await batches('split-character')
    expect(read.flat()).toEqual([
      { type: 'content', text: 'é 😀 ü' },
      { type: 'content', text: 'ß' },
    ])
  })

  it('decodes a refusal whose bytes two network reads split', async () => {
    expect(await batches('split-refusal')).toEqual([
      [
        {
          type: 'failure',
          failure: {
            kind: 'unavailable',
            status: 503,
            detail: 'upstream answered 503: {"error":{"message":"überlastet 😀 bitte später"}}',
          },
        },
      ],
    ])
  })

  it('drops a byte order mark that opens the stream, and only that one', async () => {
    // A second mark is no mark: it begins a line that is no field, as the SSE spec reads it.
    expect(await batches('byte-order-mark')).toEqual([[{ type: 'content', text: 'a' }]])
  })

  it('takes a finish chunk as the end when [DONE] does not follow', async () => {
    expect(await batches('finish-without-done')).toEqual([
      [
        { type: 'content', text: 'a' },
        { type: 'finish', reason: 'stop' },
      ],
    ])
  })

  it('reports a stream that closed before it finished, after what it delivered', async () => {
    expect(await batches('cut-short')).toEqual([
      [
        { type: 'content', text: 'a' },
        { type: 'content', text: 'b' },
      ],
      [{ type: 'failure', failure: { kind: 'unavailable', detail: 'upstream closed the stream before it finished' } }],
    ])
  })
})

/** Plain (non-stream) replies go through undici's dispatcher, gathered whole (`plain-exchange.ts`). */
describe('the OpenAI-compatible adapter reading a plain reply', () => {
  const REPLY = {
    id: 'c',
    object: 'chat.completion',
    created: 1,
    model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: 'hello there' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
  }
  let plain: Server
  let url: string
  let seen: { body: string; closed: boolean }[] = []
  beforeAll(async () => {
    plain = createServer((req, res) => {
      let body = ''
      const record = { body, closed: false }
      seen.push(record)
      req.on('data', (d) => (record.body = body += d))
      res.on('close', () => (record.closed = !res.writableFinished))
      req.on('end', () => {
        if (req.url === '/ok/chat/completions') {
          res.writeHead(200, { 'content-type': 'application/json' })
          // In pieces: the reply is gathered whole before it is read.
          const text = JSON.stringify(REPLY)
          res.write(text.slice(0, 40))
          setTimeout(() => res.end(text.slice(40)), 20)
        } else if (req.url === '/refused/chat/completions') {
          res.writeHead(422, { 'content-type': 'application/json' })
          res.end(`{"error":\n  {"message":"bad ${'x'.repeat(5000)}"}}`)
        } else if (req.url === '/refused-cut/chat/completions') {
          res.writeHead(503, { 'content-type': 'text/plain' })
          res.write('overloaded, try later')
          setTimeout(() => res.destroy(), 20)
        } else if (req.url === '/not-json/chat/completions') {
          res.writeHead(200, { 'content-type': 'application/json' })
          res.end('<html>oops</html>')
        } else if (req.url === '/slow/chat/completions') {
          setTimeout(() => res.end(JSON.stringify(REPLY)), 5000).unref()
        }
      })
    })
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(plain.address() as AddressInfo).port}`
  })
  afterAll(
    () =>
      new Promise<void>((resolve) => {
        plain.closeAllConnections()
        plain.close(() => resolve())
      }),
  )

  async function reply(path: string, cancel = new Cancel(), replyTimeoutMs = 2000): Promise<UpstreamEvent[][]> {
    const provider = new OpenAICompatibleProvider(`${url}/${path}`, 'sk-test', {
      firstByteTimeoutMs: 2000,
      replyTimeoutMs,
      idleTimeoutMs: 2000,
    })
    const out: UpstreamEvent[][] = []
    try {
      for await (const events of provider.stream('up-model', { bodyJson: '{"messages":[]}', stream: false }, cancel))
        out.push([...events])
    } finally {
      await provider.close()
    }
    return out
  }

  it('sends the request body and reads the whole reply as one batch', async () => {
    seen = []
    const [batch, ...rest] = await reply('ok')
    expect(rest).toEqual([])
    expect(batch!.find((e) => e.type === 'content')).toEqual({ type: 'content', text: 'hello there' })
    expect(batch!.at(-1)).toMatchObject({ type: 'usage' })
    expect(JSON.parse(seen[0]!.body)).toEqual({ model: 'up-model', stream: false, messages: [] })
  })

  it('reports a refusal with its status and the start of its body on one line', async () => {
    const [[failure]] = (await reply('refused')) as [[Extract<UpstreamEvent, { type: 'failure' }>]]
    expect(failure.failure.kind).toBe('unavailable')
    expect(failure.failure.status).toBe(422)
    expect(failure.failure.detail).toMatch(/^upstream answered 422: \{"error": \{"message":"bad x+$/)
    expect(failure.failure.detail.length).toBeLessThan(240)
  })

  it('keeps the status of a refusal whose body was cut short', async () => {
    expect(await reply('refused-cut')).toEqual([
      [
        {
          type: 'failure',
          failure: { kind: 'unavailable', status: 503, detail: 'upstream answered 503: overloaded, try later' },
        },
      ],
    ])
  })

  it('refuses a reply that is not JSON', async () => {
    expect(await reply('not-json')).toEqual([
      [{ type: 'failure', failure: { kind: 'invalid_output', detail: 'reply is not JSON' } }],
    ])
  })

  it('gives up past its time budget, and drops the request', async () => {
    seen = []
    const started = performance.now()
    expect(await reply('slow', new Cancel(), 150)).toEqual([
      [{ type: 'failure', failure: { kind: 'unavailable', detail: 'no reply within 150 ms' } }],
    ])
    expect(performance.now() - started).toBeLessThan(1500)
    await expect.poll(() => seen[0]?.closed).toBe(true)
  })

  it('stops when the client goes away, before or during the request', async () => {
    const gone = new Cancel()
    gone.abort()
    expect(await reply('slow', gone)).toEqual([
      [{ type: 'failure', failure: { kind: 'aborted', detail: 'the client went away' } }],
    ])
    seen = []
    const leaving = new Cancel()
    setTimeout(() => leaving.abort(), 100)
    expect(await reply('slow', leaving)).toEqual([
      [{ type: 'failure', failure: { kind: 'aborted', detail: 'the client went away' } }],
    ])
    await expect.poll(() => seen[0]?.closed).toBe(true)
  })

  it('reports a connection that fails', async () => {
    const provider = new OpenAICompatibleProvider('http://127.0.0.1:9/v1', undefined, {
      firstByteTimeoutMs: 2000,
      replyTimeoutMs: 2000,
      idleTimeoutMs: 2000,
    })
    const out: UpstreamEvent[][] = []
    for await (const events of provider.stream('m', { bodyJson: '{}', stream: false }, new Cancel()))
      out.push([...events])
    await provider.close()
    expect(out).toEqual([
      [
        {
          type: 'failure',
          failure: { kind: 'unavailable', detail: 'upstream connection failed: ECONNREFUSED', unreached: true },
        },
      ],
    ])
  })
})

/** A broken upstream cannot make the gateway hold an unbounded reply in memory. */
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
      connections,
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
