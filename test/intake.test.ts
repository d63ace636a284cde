import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { depositTo, issueKey, openAccount } from '../src/accounts/operations.js'
import { addressOf, chat, marketPerTest, sseEvents } from './helpers/market.js'

const market = marketPerTest()

const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hello' }], max_tokens: 20, stream: true }

describe('maxRequestsPerAccount', () => {
  it('refuses an account its next request while it has that many in flight, and no other account', async () => {
    // Streams of 12 words 150 ms apart: each stays in flight about two seconds, long enough for the third request
    // to arrive while both are served on a slow machine.
    const mk = await market({ sim: { chunkDelayMs: 150 }, tuning: { maxRequestsPerAccount: 2 } })
    const { account } = await openAccount(mk.store, addressOf(0x22), Date.now())
    await depositTo(mk.store, account.id, 1_000_000n, Date.now())
    await mk.store.accounts.approve(account.id, 1_000_000n)
    const other = (await issueKey({ now: Date.now(), store: mk.store, accountId: account.id, name: 'other' })).key

    const inFlight = [chat(mk.url, mk.key, body), chat(mk.url, mk.key, body)]
    // Both have their status line: both hold their slot.
    const started = await Promise.all(inFlight)
    expect(started.map((r) => r.status)).toEqual([200, 200])

    const refused = await chat(mk.url, mk.key, body)
    expect(refused.status).toBe(503)
    expect(refused.headers.get('retry-after')).toBe('1')
    const { error } = await refused.json()
    expect(error).toMatchObject({ type: 'api_error', code: 'no_capacity', param: null })
    expect(error.message).toContain('This account has 2 requests in flight')
    expect(refused.headers.get('x-request-id')).toMatch(/^req_/)
    // Another account is served meanwhile.
    const theirs = await chat(mk.url, other, body)
    expect(theirs.status).toBe(200)
    expect((await sseEvents(theirs)).at(-1)).toBe('[DONE]')

    // Once they finish, the account is served again; the refusal charged nothing and held nothing.
    for (const r of started) expect((await sseEvents(r)).at(-1)).toBe('[DONE]')
    const again = await chat(mk.url, mk.key, body)
    expect(again.status).toBe(200)
    expect((await sseEvents(again)).at(-1)).toBe('[DONE]')
    const outcomes = (await mk.store.usage.list(mk.accountId, { limit: 10 })).map((u) => u.outcome)
    expect(outcomes).toEqual(['completed', 'completed', 'completed'])
    expect((await mk.store.accounts.byId(mk.accountId))!.held).toBe(0n)
  })

  it('gives the slot back whatever the request came to: refused input, a refused admission, a client gone', async () => {
    const mk = await market({ sim: { chunkDelayMs: 40 }, tuning: { maxRequestsPerAccount: 1 }, funds: 2_000n })
    expect((await chat(mk.url, mk.key, { ...body, model: 'svc/nope@1' })).status).toBe(404)
    expect((await chat(mk.url, mk.key, { ...body, max_tokens: 4000 })).status).toBe(402)
    const ac = new AbortController()
    const gone = await fetch(`${mk.url}/v1/chat/completions`, {
      method: 'POST',
      signal: ac.signal,
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${mk.key}` },
    })
    expect(gone.status).toBe(200)
    ac.abort()
    // Served once the response of the client that left has closed (its slot is given back then).
    await expect.poll(async () => (await chat(mk.url, mk.key, { ...body, stream: false })).status).toBe(200)
    const outcomes = (await mk.store.usage.list(mk.accountId, { limit: 10 })).map((u) => u.outcome)
    expect(outcomes.sort()).toEqual(['client_closed', 'completed'])
    // The refused admission is counted, not recorded.
    await mk.server.gateway.refusals.flush()
    const refused = await mk.store.refusals.list(mk.accountId, 0, 10)
    expect(refused.map((r) => `${r.code}:${r.count}`)).toEqual(['insufficient_quota:1'])
  })
})

describe('maxBodyBytesInFlight', () => {
  it('refuses a request before its body while bodies held take the budget, and takes one again once they are gone', async () => {
    const mk = await market({ tuning: { maxBodyBytesInFlight: 4 * 1024 * 1024 } })
    const { hostname, port } = new URL(mk.url)
    // A body announced just short of the budget and sent in part: held by the gateway until it is whole.
    const held = connect(Number(port), hostname)
    await new Promise<void>((resolve, reject) => held.once('connect', resolve).once('error', reject))
    held.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${mk.key}\r\ncontent-type: application/json\r\n` +
        `content-length: ${4 * 1024 * 1024 - 100}\r\n\r\n{"model":"svc/atlas@1","messages":[`,
    )
    // Another's small request finds the budget taken: refused at once, its body not read.
    await expect.poll(async () => (await chat(mk.url, mk.key, { ...body, stream: false })).status).toBe(503)
    const refused = await chat(mk.url, mk.key, { ...body, stream: false })
    expect(refused.headers.get('retry-after')).toBe('1')
    expect((await refused.json()).error).toMatchObject({
      code: 'no_capacity',
      message: expect.stringContaining('MiB of request bodies at once'),
    })
    held.destroy()
    await expect.poll(async () => (await chat(mk.url, mk.key, { ...body, stream: false })).status).toBe(200)
    // A probe that came before the held body counted was served: every request that ran completed.
    const outcomes = (await mk.store.usage.list(mk.accountId, { limit: 10 })).map((u) => u.outcome)
    expect(outcomes.length).toBeGreaterThan(0)
    expect(outcomes.every((o) => o === 'completed')).toBe(true)
  })

  it('counts a body only until it is read: long streams hold no budget', async () => {
    // Bodies as large as the budget allows one at a time, and streams that last: each body is read before the next.
    const mk = await market({
      sim: { chunkDelayMs: 30 },
      tuning: { maxBodyBytesInFlight: 4 * 1024 * 1024 },
      edit: (config) => void (config.models.find((m) => m.id === 'svc/atlas@1')!.contextLimit = 1_000_000),
    })
    const big = {
      ...body,
      messages: [
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: ' '.repeat(3 * 1024 * 1024) },
        { role: 'user', content: 'go on' },
      ],
    }
    const first = await chat(mk.url, mk.key, big)
    expect(first.status).toBe(200)
    // The first stream is still running: its body was read, so it counts no more.
    const second = await chat(mk.url, mk.key, big)
    expect(second.status).toBe(200)
    for (const r of [first, second]) expect((await sseEvents(r)).at(-1)).toBe('[DONE]')
  })
})

describe('the intake of a client that leaves during its key lookup', () => {
  it('gives nothing to keep: the account is served afterwards', async () => {
    const mk = await market({ tuning: { maxRequestsPerAccount: 1 } })
    // The key lookup waits for the store while the client goes away.
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const blocking = mk.store.db.connection().execute(() => gate)
    const { hostname, port } = new URL(mk.url)
    const text = JSON.stringify({ ...body, stream: false })
    const socket = connect(Number(port), hostname)
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${mk.key}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
    )
    socket.destroy()
    const conns = () =>
      new Promise<number>((resolve, reject) =>
        mk.server.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
      )
    await expect.poll(conns).toBe(0)
    open()
    await blocking
    const res = await chat(mk.url, mk.key, { ...body, stream: false })
    expect(res.status).toBe(200)
  })
})
