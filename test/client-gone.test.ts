import { connect } from 'node:net'
import { get } from 'node:http'
import { describe, expect, it, vi } from 'vitest'
import { chat, chatWith, marketPerTest } from './helpers/market.js'
import { TextCount } from '../src/metering/o200k.js'

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
      get(
        `${mk.url}/v1/usage?limit=1`,
        { agent: false, headers: { authorization: `Bearer ${mk.key}`, connection: 'close' } },
        (res) => {
          res.resume().once('end', () => resolve(res.statusCode!))
        },
      ).once('error', reject),
    )
    expect(warm).toBe(200)
    const conns = () =>
      new Promise<number>((resolve, reject) =>
        mk.server.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
      )
    await expect.poll(conns).toBe(0)
    // Admission waits for the store while the client goes away: the connection closes before the hold exists.
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const blocking = mk.store.db.connection().execute(() => gate)
    await sendAndLeave(mk.url, mk.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hello there' }],
      max_tokens: 20,
      stream,
    })
    await expect.poll(conns).toBe(0)
    open()
    await blocking
    await expect
      .poll(async () => (await mk.store.usage.list(mk.accountId, { limit: 5 })).map((u) => u.outcome))
      .toEqual(['client_closed'])
    const [u] = await mk.store.usage.list(mk.accountId, { limit: 1 })
    expect(u!.cost).toBe(0n)
    expect((await mk.store.accounts.byId(mk.accountId))!).toMatchObject({ balance: 10_000_000n, held: 0n })
  })
})

describe('a client that leaves while its long prompt is counted', () => {
  it('is counted no further, and neither served, held nor recorded', async () => {
    // One request at a time for the account: a slot the left request kept would refuse the next.
    const mk = await market({ tuning: { maxRequestsPerAccount: 1 } })
    // 2 MB of letters at random for cortex's vendor (no context given): counted whole, some 240 steps.
    let x = 9
    const letters = Array.from({ length: 2_000_000 }, () =>
      String.fromCharCode(97 + (((x = (x * 1103515245 + 12345) >>> 0) >>> 16) % 26)),
    ).join('')
    const leave = new AbortController()
    const step = TextCount.prototype.step
    let counted = 0
    let lastStepAt = 0
    const spy = vi.spyOn(TextCount.prototype, 'step').mockImplementation(function (this: TextCount, units: number) {
      const before = this.position
      const done = step.call(this, units)
      // The client leaves once the gateway has counted some of its prompt.
      if ((counted += this.position - before) > 10_000) leave.abort()
      lastStepAt = performance.now()
      return done
    })
    try {
      const sent = chatWith(
        mk.url,
        mk.key,
        { model: 'svc/cortex@1', messages: [{ role: 'user', content: letters }] },
        { signal: leave.signal },
      )
      await expect(sent).rejects.toThrow()
      // Until the gateway has counted nothing for a while: it gave the count up, or (the fault) finished it.
      await expect
        .poll(() => counted > 0 && performance.now() - lastStepAt > 300, { timeout: 10_000, interval: 50 })
        .toBe(true)
    } finally {
      spy.mockRestore()
    }
    expect(counted).toBeLessThan(500_000)
    expect(mk.sims.vendor.stats.requests).toBe(0)
    expect(await mk.store.usage.list(mk.accountId, { limit: 5 })).toEqual([])
    expect((await mk.store.accounts.byId(mk.accountId))!).toMatchObject({ balance: 10_000_000n, held: 0n })
    const next = await chat(mk.url, mk.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
    })
    expect(next.status, await next.clone().text()).toBe(200)
  })
})
