import { connect } from 'node:net'
import { get } from 'node:http'
import { describe, expect, it } from 'vitest'
import { marketPerTest } from './helpers/market.js'

const market = marketPerTest()

/** Sends one raw HTTP request and closes the socket at once, without reading the answer. */
async function sendAndLeave(url: string, key: string, body: unknown): Promise<void> {
  const { hostname, port } = new URL(url)
  const text = JSON.stringify(body)
  const socket = connect(Number(port), hostname)
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
  )
  await new Promise<void>((resolve) => socket.end(resolve))
  socket.destroy()
}

describe('a client that leaves before its request is admitted', () => {
  it.each([false, true])('is not served nor charged (stream %s)', async (stream) => {
    // The key check runs before the body is read; a warm key cache lets it pass without the store, so the request
    // is read and prepared and then waits for admission.
    const mk = await market({ sim: { chunkDelayMs: 5 }, tuning: { keyCacheMs: 60_000 } })
    const warm = await new Promise<number>((resolve, reject) =>
      get(`${mk.url}/v1/usage?limit=1`, { agent: false, headers: { authorization: `Bearer ${mk.key}`, connection: 'close' } }, (res) => {
        res.resume().once('end', () => resolve(res.statusCode!))
      }).once('error', reject))
    expect(warm).toBe(200)
    const conns = () => new Promise<number>((resolve, reject) => mk.server.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))))
    await expect.poll(conns).toBe(0)
    // Admission waits for the store while the client goes away: the connection closes before the hold exists.
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const blocking = mk.store.db.connection().execute(() => gate)
    await sendAndLeave(mk.url, mk.key, { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 20, stream })
    await expect.poll(conns).toBe(0)
    open()
    await blocking
    await expect.poll(async () => (await mk.store.usage.list(mk.accountId, { limit: 5 })).map((u) => u.outcome)).toEqual(['client_closed'])
    const [u] = await mk.store.usage.list(mk.accountId, { limit: 1 })
    expect(u!.cost).toBe(0n)
    expect((await mk.store.accounts.byId(mk.accountId))!).toMatchObject({ balance: 10_000_000n, held: 0n })
  })
})
