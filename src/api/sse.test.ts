import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyReply } from 'fastify'
import { describe, expect, it } from 'vitest'
import type { ReplyEvent } from '../gateway/reply-events.js'
import type { Offer } from '../routing/catalog.js'
import { ChunkEncoder, DONE, isPlainAscii, ChatStream } from './sse.js'

const TEXTS = [
  '',
  'Hello',
  ' world,',
  '~ {}[]:',
  'say "hi"',
  'back\\slash',
  'line\nend',
  'tab\t',
  '\u0000',
  '\u001f',
  '\u007f',
  'é',
  'x😀',
  '\u2028',
  '\ud800',
  'ü end',
]
const identity = { id: 'chatcmpl-1', created: 1700000000, model: 'm' }

/** What the encoder wrote before the plain path: the reference for every text. */
const stringified = (text: string, fp = 'fp') =>
  `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":${JSON.stringify(fp)},"choices":[{"index":0,"delta":{"content":${JSON.stringify(text)}},"finish_reason":null}]}\n\n`

describe('the plain content path', () => {
  it('claims plain only for ASCII texts that JSON.stringify leaves as they are', () => {
    for (const text of TEXTS) {
      expect(isPlainAscii(text), JSON.stringify(text)).toBe(
        // eslint-disable-next-line no-control-regex -- ASCII is what is tested, control characters included
        JSON.stringify(text) === `"${text}"` && /^[\x00-\x7f]*$/.test(text),
      )
    }
  })

  it('encodes every text as JSON.stringify does', () => {
    const enc = new ChunkEncoder(identity)
    enc.fingerprint('fp')
    for (const text of TEXTS) expect(enc.content(text)).toBe(stringified(text))
  })

  it('knows a prefix that is not ASCII', () => {
    const enc = new ChunkEncoder(identity)
    expect(enc.ascii).toBe(true)
    enc.fingerprint('prøfil:1')
    expect(enc.ascii).toBe(false)
  })
})

/** The bytes a client receives from a ChatStream fed `reads` (each read's texts as one batch) with fingerprint `fp`. */
async function received(reads: string[][], fp: string): Promise<Buffer> {
  const server = createServer((_req, res: ServerResponse) => {
    const reply = { raw: res, hijack: () => reply, getHeaders: () => ({}), elapsedTime: 0 } as unknown as FastifyReply
    const sse = new ChatStream({
      reply,
      identity,
      requestId: 'req_1',
      fingerprint: () => fp,
      svc: () => ({ cost_usdc: '0.000000', provider: 'p', request_id: 'req_1' }),
      keepAliveMs: 60_000,
      stallTimeoutMs: 60_000,
    })
    const offer = {} as Offer
    let i = 0
    const next = () => {
      if (i === reads.length) return sse.end(DONE)
      const batch: ReplyEvent[] = i === 0 ? [{ type: 'start', offer }] : []
      for (const text of reads[i++]!) batch.push({ type: 'content', text })
      sse.events(batch)
      setImmediate(next)
    }
    next()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)
    return Buffer.from(await res.arrayBuffer())
  } finally {
    server.close()
  }
}

describe('ChatStream on the wire', () => {
  it.each([['fp'], ['prøfil:1']])(
    'sends the UTF-8 of every chunk, reads of ASCII and not mixed (fingerprint %s)',
    async (fp) => {
      const reads = [['Hello', ' world'], ['é', ' ok'], [' plain', ' again'], ['x😀'], ['say "hi"', '\u007f']]
      const expected = reads
        .flat()
        .map((t) => stringified(t, fp))
        .join('')
      const role = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":${JSON.stringify(fp)},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n`
      const bytes = await received(reads, fp)
      expect(bytes.equals(Buffer.from(role + expected + DONE, 'utf8'))).toBe(true)
    },
  )
})
