import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startMarket, type Market } from './helpers/market.js'

let m: Market
beforeAll(async () => {
  m = await startMarket({ tuning: { maxConnections: 256, headTimeoutMs: 1_500 } })
})
const closers: (() => Promise<void>)[] = []
afterAll(async () => {
  await m?.close()
  for (const close of closers) await close()
})

function open(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname, () => resolve(s)).on('error', reject)
  })
}

/**
 * An idle connection of a flood: undefined when it is not established within a second (a loaded machine's full accept
 * queue drops the handshake, and the client would wait for its retries; the flood goes on without it).
 */
function flood(url: string): Promise<Socket | undefined> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve) => {
    const s = connect(Number(port), hostname, () => {
      clearTimeout(timer)
      resolve(s)
    }).on('error', () => resolve(undefined))
    const timer = setTimeout(() => {
      s.destroy()
      resolve(undefined)
    }, 1_000)
  })
}

async function served(): Promise<number> {
  const started = Date.now()
  const res = await fetch(`${m.url}/v1/models`, { signal: AbortSignal.timeout(5_000) })
  expect(res.status).toBe(200)
  await res.text()
  return Date.now() - started
}

describe('idle connections from one address', () => {
  it('four times the connection slots, sending nothing, leave a new client served within a second', async () => {
    const idle: Socket[] = []
    try {
      for (let i = 0; i < 1024; i++) idle.push((await open(m.url)).on('error', () => {}))
      for (let i = 0; i < 5; i++) expect(await served()).toBeLessThan(1_000)
      // The flood goes on: reopened connections take slots again, and new clients are still served.
      for (let i = 0; i < 512; i++) idle.push((await open(m.url)).on('error', () => {}))
      expect(await served()).toBeLessThan(1_000)
      // Most of the flood was closed to make room; the rest time out as they send no request head. Counted on the
      // server: a loaded machine may complete handshakes its accept queue then drops, which the client still holds.
      const serverHolds = () =>
        new Promise<number>((resolve) => m.server.app.server.getConnections((_e, n) => resolve(n)))
      // What is left is this test's own keep-alive connections, which sent requests.
      await expect.poll(serverHolds, { timeout: 20_000, interval: 250 }).toBeLessThanOrEqual(2)
    } finally {
      for (const s of idle) s.destroy()
    }
  })

  it('leave a keep-alive client working', async () => {
    // Its own gateway, with the default head timeout: a loaded machine's stall of a second or two must not pass for
    // the client's silence here (the flood needs no timeout: it is four times the slots).
    const own = await startMarket({ tuning: { maxConnections: 256 } })
    closers.push(() => own.close())
    const keepAlive = await open(own.url)
    const ask = () =>
      new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('the keep-alive connection got no answer in 10 s')), 10_000)
        const closed = () => reject(new Error('the server closed the keep-alive connection'))
        keepAlive.once('close', closed)
        keepAlive.once('data', (d) => {
          clearTimeout(timer)
          keepAlive.off('close', closed)
          resolve(d.toString())
        })
        keepAlive.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n')
      })
    expect((await ask()).slice(0, 15)).toBe('HTTP/1.1 200 OK')
    const idle: Socket[] = []
    try {
      for (let i = 0; i < 512; i++) {
        const s = await flood(own.url)
        if (s) idle.push(s.on('error', () => {}))
      }
      expect(idle.length).toBeGreaterThanOrEqual(256)
      expect((await ask()).slice(0, 15)).toBe('HTTP/1.1 200 OK')
      expect(keepAlive.destroyed).toBe(false)
    } finally {
      for (const s of idle) s.destroy()
      keepAlive.destroy()
    }
  }, 60_000)
})
