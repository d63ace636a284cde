import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Cancel } from './cancel.js'
import { OpenAICompatibleProvider } from './openai-compatible.js'
import type { UpstreamEvent } from './types.js'

const chunk = (delta: string, finish = 'null') =>
  `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{${delta}},"finish_reason":${finish}}]}\n\n`

/** Bodies sent in ONE write each: every event of the stream arrives in the same network read. */
const BODIES: Record<string, string> = {
  '/bad-in-the-middle/chat/completions': chunk('"content":"a"') + 'data: not json\n\n' + chunk('"content":"b"') + 'data: [DONE]\n\n',
  '/error-in-the-middle/chat/completions': chunk('"content":"a"') + 'data: {"error":{"message":"overloaded"}}\n\n' + chunk('"content":"b"'),
  '/finish-without-done/chat/completions': chunk('"content":"a"') + chunk('', '"stop"'),
  '/cut-short/chat/completions': chunk('"content":"a"') + chunk('"content":"b"'),
}

let server: Server
let base: string
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume()
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.end(BODIES[req.url ?? ''] ?? '')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

async function batches(path: string): Promise<UpstreamEvent[][]> {
  const provider = new OpenAICompatibleProvider(`${base}/${path}`, undefined, { firstByteTimeoutMs: 2000, replyTimeoutMs: 2000, idleTimeoutMs: 2000 })
  const out: UpstreamEvent[][] = []
  try {
    for await (const events of provider.stream('m', { bodyJson: '{}', stream: true }, new Cancel())) out.push([...events])
  } finally {
    await provider.close()
  }
  return out
}

/** The adapter yields the events of one network read together; a failure ends them, whatever follows in the read. */
describe('the OpenAI-compatible adapter reading a stream', () => {
  it('yields one batch per read, and nothing after a chunk that is not JSON', async () => {
    expect(await batches('bad-in-the-middle')).toEqual([[
      { type: 'content', text: 'a' },
      { type: 'failure', failure: { kind: 'invalid_output', detail: 'stream chunk is not JSON' } },
    ]])
  })

  it('ends with an upstream error reported in the stream', async () => {
    const [first, ...rest] = await batches('error-in-the-middle')
    expect(rest).toEqual([])
    expect(first!.map((e) => e.type)).toEqual(['content', 'failure'])
    expect(first![1]).toMatchObject({ failure: { kind: 'unavailable', detail: 'upstream error in stream: overloaded' } })
  })

  it('takes a finish chunk as the end when [DONE] does not follow', async () => {
    expect(await batches('finish-without-done')).toEqual([[{ type: 'content', text: 'a' }, { type: 'finish', reason: 'stop' }]])
  })

  it('reports a stream that closed before it finished, after what it delivered', async () => {
    expect(await batches('cut-short')).toEqual([
      [{ type: 'content', text: 'a' }, { type: 'content', text: 'b' }],
      [{ type: 'failure', failure: { kind: 'unavailable', detail: 'upstream closed the stream before it finished' } }],
    ])
  })
})
