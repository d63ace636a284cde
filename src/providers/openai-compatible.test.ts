import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Cancel } from './cancel.js'
import { OpenAICompatibleProvider } from './openai-compatible.js'
import { requestBody } from './upstream-wire.js'
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
