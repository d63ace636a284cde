import { connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { marketPerTest, type Market, type MarketOptions } from './helpers/market.js'

const market = marketPerTest()

/**
 * Long enough that the kernel's socket buffers (a few MB on loopback) hold only part of it: about 300 bytes a token.
 */
const TOKENS = 60_000

/**
 * A market whose atlas replies TOKENS words and may be asked for them. The simulator plans such a reply before its
 * first byte (about 0.4 s, longer on a busy machine): more than the test market's first-byte budget.
 */
function longReplies(opts: MarketOptions = {}): Promise<Market> {
  return market({
    ...opts,
    tuning: { firstByteTimeoutMs: 10_000, ...opts.tuning },
    sim: { replyTokens: TOKENS },
    edit: (config) => {
      const atlas = config.models.find((m) => m.id === 'svc/atlas@1')!
      atlas.contextLimit = 2 * TOKENS
      atlas.capabilities.maxOutputTokens = TOKENS
    },
  })
}

/** Sends a streamed request on a raw socket; resolves at its first bytes, with the socket paused: it reads no more. */
async function streamAndPause(mk: Market): Promise<Socket> {
  const { hostname, port } = new URL(mk.url)
  // Token log probabilities make each chunk larger, so fewer tokens fit in the buffers.
  const body = JSON.stringify({
    model: 'svc/atlas@1',
    messages: [{ role: 'user', content: 'tell me a long story' }],
    max_tokens: TOKENS,
    stream: true,
    logprobs: true,
  })
  const socket = connect(Number(port), hostname)
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${mk.key}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  )
  await new Promise<void>((resolve) => socket.once('data', () => resolve()))
  socket.pause()
  return socket
}

async function onlyUsage(mk: Market) {
  await expect
    .poll(async () => (await mk.store.usage.list(mk.accountId, { limit: 5 })).map((u) => u.outcome), {
      timeout: 10_000,
    })
    .toEqual(['client_closed'])
  const [u] = await mk.store.usage.list(mk.accountId, { limit: 1 })
  return u!
}

describe('a client that reads its stream slowly', () => {
  it('holds the upstream back, and pays only for what it was sent when it leaves', async () => {
    const mk = await longReplies()
    const socket = await streamAndPause(mk)
    // Time for an unbounded gateway to read the whole reply (this one stops once the client's buffers are full).
    await new Promise((r) => setTimeout(r, 2_000))
    // The upstream is still writing its reply: nobody took the rest.
    expect(mk.sims.atlasCheap.stats.active).toBe(1)
    socket.destroy()
    const u = await onlyUsage(mk)
    expect(u.completionTokens).toBeGreaterThan(0)
    expect(u.completionTokens).toBeLessThan(TOKENS * 0.4)
    expect(u.cost).toBeGreaterThan(0n)
    await expect.poll(() => mk.sims.atlasCheap.stats.active).toBe(0)
    expect(await mk.store.accounts.byId(mk.accountId)).toMatchObject({ balance: 10_000_000n - u.cost, held: 0n })
  })

  it('is taken as gone once it takes nothing for stallTimeoutMs, and pays for what it was sent', async () => {
    const mk = await longReplies({ tuning: { stallTimeoutMs: 500 } })
    const socket = await streamAndPause(mk)
    // The gateway closes the connection; the client reads on to see it.
    let closed = false
    socket.once('close', () => (closed = true))
    // Still reading nothing: the gateway gives up on it and settles.
    const u = await onlyUsage(mk)
    // Reading on, the client finds its connection closed.
    socket.on('data', () => {})
    socket.resume()
    await expect.poll(() => closed, { timeout: 10_000 }).toBe(true)
    expect(u.completionTokens).toBeGreaterThan(0)
    expect(u.completionTokens).toBeLessThan(TOKENS * 0.4)
    expect(await mk.store.accounts.byId(mk.accountId)).toMatchObject({ balance: 10_000_000n - u.cost, held: 0n })
  })

  it('is not taken for a silent upstream while the upstream waits for it', async () => {
    const mk = await longReplies({ tuning: { idleTimeoutMs: 1_000, stallTimeoutMs: 20_000 } })
    const socket = await streamAndPause(mk)
    // Paused three idle timeouts long: the gateway waits for the client, the upstream for the gateway.
    await new Promise((r) => setTimeout(r, 3_000))
    const chunks: Buffer[] = []
    let tail = ''
    socket.on('data', (b: Buffer) => {
      chunks.push(b)
      tail = (tail + b.toString('latin1')).slice(-64)
    })
    socket.resume()
    // The chunked body's last chunk: the reply is whole.
    await expect.poll(() => tail.endsWith('data: [DONE]\n\n\r\n0\r\n\r\n'), { timeout: 10_000 }).toBe(true)
    socket.destroy()
    const text = Buffer.concat(chunks).toString('utf8')
    expect(text).not.toContain('"error"')
    expect(text).toContain('"finish_reason":"stop"')
    const [u] = await mk.store.usage.list(mk.accountId, { limit: 1 })
    expect(u).toMatchObject({ outcome: 'completed', completionTokens: TOKENS })
  })
})
