import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, startMarket, type Market } from './helpers/market.js'
import { expectError, raw } from './helpers/errors.js'

describe('connections beyond maxConnections', () => {
  const GET = 'GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'

  it('close the oldest that has sent nothing to admit a new client', async () => {
    const m = await startMarket({ tuning: { maxConnections: 3 } })
    const { hostname, port } = new URL(m.url)
    const open = () =>
      new Promise<Socket>((resolve, reject) => {
        const s = connect(Number(port), hostname, () => resolve(s)).on('error', reject)
      })
    try {
      const idle = [await open(), await open(), await open()]
      const closed = new Promise((resolve) => idle[0]!.once('close', resolve))
      expect((await raw(m.url, GET)).slice(0, 15)).toBe('HTTP/1.1 200 OK')
      await closed
      expect(idle[1]!.destroyed).toBe(false)
      for (const s of idle) s.destroy()
    } finally {
      await m.close()
    }
  })

  it('close a new one when every open connection has sent a request', async () => {
    const m = await startMarket({ tuning: { maxConnections: 2 } })
    const { hostname, port } = new URL(m.url)
    try {
      // Two keep-alive clients that have each sent a request hold both slots.
      const busy = await Promise.all(
        [0, 1].map(
          () =>
            new Promise<Socket>((resolve, reject) => {
              const s = connect(Number(port), hostname, () => s.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'))
              s.once('data', () => resolve(s)).on('error', reject)
            }),
        ),
      )
      const refused = await raw(m.url, GET).catch((e: NodeJS.ErrnoException) => e.code)
      expect(['', 'ECONNRESET']).toContain(refused)
      busy[0]!.destroy()
      await expect.poll(async () => (await raw(m.url, GET).catch(() => '')).slice(0, 15)).toBe('HTTP/1.1 200 OK')
      for (const s of busy) s.destroy()
    } finally {
      await m.close()
    }
  })
})

describe('deeply nested documents', () => {
  let m: Market
  beforeAll(async () => {
    m = await startMarket()
  })
  afterAll(() => m?.close())
  const deep = (n: number) => '{"type":"object","properties":{"a":'.repeat(n) + '{}' + '}}'.repeat(n)
  const head = '{"model":"svc/atlas@1","messages":[{"role":"user","content":"hi"}]'

  it('refuses tool parameters nested beyond any real schema, naming the field, instead of an internal error', async () => {
    const body = `${head},"tools":[{"type":"function","function":{"name":"f","parameters":${deep(50_000)}}}]}`
    await expectError(await chat(m.url, m.key, body), 400, 'feature_not_supported', 'tools[0].function.parameters')
  })

  it('refuses a json_schema response format nested beyond any real schema, naming the field', async () => {
    const body = `${head},"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${deep(50_000)}}}}`
    await expectError(
      await chat(m.url, m.key, body),
      400,
      'feature_not_supported',
      'response_format.json_schema.schema',
    )
  })

  it('still serves schemas of ordinary depth', async () => {
    const body = `${head},"tools":[{"type":"function","function":{"name":"f","parameters":${deep(10)}}}]}`
    expect((await chat(m.url, m.key, body)).status).toBe(200)
  })
})
