import { request as httpRequest } from 'node:http'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startMarket, type Market } from './helpers/market.js'

let m: Market
beforeAll(async () => {
  m = await startMarket()
})
afterAll(() => m?.close())

/** A chat request of about 5 MB: over the 4 MiB limit. */
const BIG = JSON.stringify({ model: 'svc/atlas@1', messages: [{ role: 'user', content: 'x'.repeat(5_000_000) }] })
const TRIES = 50

function expect413(status: number, body: string) {
  expect(status, body.slice(0, 200)).toBe(413)
  expect(JSON.parse(body).error.code).toBe('feature_not_supported')
}

describe('a body over the limit', () => {
  it(`is answered 413 to fetch, every time of ${TRIES}`, async () => {
    for (let i = 0; i < TRIES; i++) {
      const res = await fetch(`${m.url}/v1/chat/completions`, {
        method: 'POST',
        body: BIG,
        headers: { authorization: `Bearer ${m.key}`, 'content-type': 'application/json' },
      })
      expect413(res.status, await res.text())
    }
  })

  it(`is answered 413 to node's http, every time of ${TRIES}`, async () => {
    const once = () =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest(
          `${m.url}/v1/chat/completions`,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${m.key}`, 'content-type': 'application/json' },
          },
          (res) => {
            let body = ''
            res
              .setEncoding('utf8')
              .on('data', (c: string) => (body += c))
              .on('end', () => resolve({ status: res.statusCode!, body }))
          },
        )
        req.on('error', reject)
        req.end(BIG)
      })
    for (let i = 0; i < TRIES; i++) {
      const { status, body } = await once()
      expect413(status, body)
    }
  })

  it(`is answered 413 to the OpenAI SDK, every time of ${TRIES}, without a retry`, async () => {
    let sent = 0
    const client = new OpenAI({
      baseURL: `${m.url}/v1`,
      apiKey: m.key,
      maxRetries: 2,
      fetch: (url, init) => (sent++, fetch(url, init)),
    })
    for (let i = 0; i < TRIES; i++) {
      const err = await client.chat.completions
        .create({ model: 'svc/atlas@1', messages: [{ role: 'user', content: 'x'.repeat(5_000_000) }] })
        .catch((e: unknown) => e)
      expect(err).toBeInstanceOf(OpenAI.APIError)
      expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(413)
    }
    expect(sent).toBe(TRIES)
  })

  // Without a drain, a client still sending when the refusal comes is reset (EPIPE) before it can read it.
  it(`is answered 413 to fetch sending the body as it is produced, every time of ${TRIES}`, async () => {
    for (let i = 0; i < TRIES; i++) {
      let sent = 0
      const body = new ReadableStream<Uint8Array>({
        async pull(c) {
          if (sent >= BIG.length) return c.close()
          await new Promise((r) => setTimeout(r, 2))
          c.enqueue(new TextEncoder().encode(BIG.slice(sent, (sent += 262_144))))
        },
      })
      const headers = { authorization: `Bearer ${m.key}`, 'content-length': String(BIG.length) }
      const init = { method: 'POST', body, duplex: 'half', headers } as RequestInit
      const res = await fetch(`${m.url}/v1/chat/completions`, init)
      expect413(res.status, await res.text())
    }
  })
})
