import { describe, expect, it } from 'vitest'
import { createServer } from 'node:net'
import { chat, P, sseEvents, marketPerTest, type Market } from './helpers/market.js'
import { parseFault } from '../src/providers/simulated/faults.js'
import { parseUsdc, priceOf } from '../src/money/usdc.js'

const market = marketPerTest()

const body = (extra: Record<string, unknown> = {}) => ({
  model: 'svc/atlas@1',
  messages: [{ role: 'user', content: 'hello' }],
  max_tokens: 20,
  ...extra,
})
const balance = async (mk: Market) => (await mk.store.accounts.byId(mk.accountId))!

describe.each(['status-500', 'status-429', 'slow:5000', 'refuse-connections', 'garbage', 'break-after:0'])(
  'fault %s on the cheaper provider',
  (mode) => {
    it.each([false, true])('fails over to the second provider before any content (stream %s)', async (stream) => {
      const mk = await market()
      mk.sims.atlasCheap.setFault(parseFault(mode)!)
      const res = await chat(mk.url, mk.key, body({ stream }))
      expect(res.status).toBe(200)
      let svc: { provider: string; cost_usdc: string }
      let fingerprint: string
      if (stream) {
        const events = await sseEvents(res)
        expect(events.at(-1)).toBe('[DONE]')
        const chunks = events.slice(0, -1).map((e) => JSON.parse(e))
        expect(chunks.some((c) => c.error)).toBe(false)
        svc = chunks.at(-1).svc
        fingerprint = chunks[0].system_fingerprint
        // Nothing of the failed attempt leaked: exactly the second provider's words.
        const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')
        expect(text.split(' ')).toHaveLength(12)
      } else {
        const r = await res.json()
        svc = r.svc
        fingerprint = r.system_fingerprint
      }
      expect(svc.provider).toBe(P.atlasDear)
      expect(fingerprint).toBe('sglang-0.4:sim')
      expect(mk.sims.atlasDear.stats.requests).toBe(1)
      expect(mk.sims.tern.stats.requests).toBe(0)
    })
  },
)

describe('when every offer fails', () => {
  it('answers 503 no_capacity with Retry-After, never another model, and charges nothing', async () => {
    const mk = await market()
    mk.sims.atlasCheap.setFault({ kind: 'status-500' })
    mk.sims.atlasDear.setFault({ kind: 'refuse-connections' })
    const before = await balance(mk)
    for (const stream of [false, true]) {
      const res = await chat(mk.url, mk.key, body({ stream }))
      expect(res.status).toBe(503)
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      const e = (await res.json()).error
      expect(e).toMatchObject({ code: 'no_capacity', type: 'api_error', param: null })
      expect(e.message).toMatch(/never substituted/)
    }
    expect(mk.sims.tern.stats.requests + mk.sims.wren.stats.requests + mk.sims.vendor.stats.requests).toBe(0)
    const after = await balance(mk)
    expect(after.balance).toBe(before.balance)
    expect(after.held).toBe(0n)
    const usage = await mk.store.usage.list(mk.accountId, { limit: 5 })
    expect(usage[0]?.outcome).toBe('no_capacity')
  })

  it('answers 502 provider_output_invalid when output was refused', async () => {
    const mk = await market()
    mk.sims.atlasCheap.setFault({ kind: 'garbage' })
    mk.sims.atlasDear.setFault({ kind: 'garbage' })
    const res = await chat(mk.url, mk.key, body())
    expect(res.status).toBe(502)
    expect(res.headers.get('retry-after')).toBe('1')
    expect((await res.json()).error.code).toBe('provider_output_invalid')
    expect((await balance(mk)).held).toBe(0n)
  })

  it('fails over past a provider whose port refuses connections', async () => {
    const closed = createServer()
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r))
    const port = (closed.address() as { port: number }).port
    await new Promise<void>((r) => closed.close(() => r()))
    const mk = await market({ edit: (c) => void (c.providers[0]!.baseUrl = `http://127.0.0.1:${port}/v1`) })
    const r = await (await chat(mk.url, mk.key, body())).json()
    expect(r.svc.provider).toBe(P.atlasDear)
  })
})

describe('after content reached the client', () => {
  it('ends the stream with a stream_interrupted chunk and [DONE], charging nothing', async () => {
    const mk = await market()
    mk.sims.atlasCheap.setFault({ kind: 'break-after', chunks: 3 })
    const before = await balance(mk)
    const res = await chat(mk.url, mk.key, body({ stream: true }))
    expect(res.status).toBe(200)
    const events = await sseEvents(res)
    expect(events.at(-1)).toBe('[DONE]')
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e))
    expect(chunks.filter((c) => c.choices[0]?.delta?.content)).toHaveLength(3)
    const last = chunks.at(-1)
    expect(last.choices).toEqual([])
    expect(last.error).toMatchObject({ code: 'stream_interrupted', type: 'api_error' })
    expect(last.error.message).toMatch(/Nothing was charged/)
    expect(mk.sims.atlasDear.stats.requests).toBe(0)
    const after = await balance(mk)
    expect(after.balance).toBe(before.balance)
    expect(after.held).toBe(0n)
    const usage = await mk.store.usage.list(mk.accountId, { limit: 1 })
    expect(usage[0]).toMatchObject({ outcome: 'stream_interrupted', cost: 0n })
  })
})

describe('health and capacity', () => {
  it('opens the breaker after consecutive failures and probes after the cool-down', async () => {
    const log: string[] = []
    // A cool-down the steps before the probe (two requests, a capture's sync, the model list) cannot outlast under
    // load.
    const mk = await market({
      tuning: { breakerFailures: 2, breakerCooldownMs: 1_000 },
      log: (msg) => void log.push(msg),
    })
    mk.sims.atlasCheap.setFault({ kind: 'status-500' })
    for (let i = 0; i < 2; i++)
      expect((await (await chat(mk.url, mk.key, body())).json()).svc.provider).toBe(P.atlasDear)
    expect(mk.sims.atlasCheap.stats.requests).toBe(2)
    // Open: the failing provider is not even tried.
    expect((await (await chat(mk.url, mk.key, body())).json()).svc.provider).toBe(P.atlasDear)
    expect(mk.sims.atlasCheap.stats.requests).toBe(2)
    // The model list prices the model at the live offer only.
    const models = await (await fetch(`${mk.url}/v1/models`)).json()
    expect(models.data.find((x: { id: string }) => x.id === 'svc/atlas@1').svc.pricing.input_price_per_mtok).toBe(
      '200000',
    )
    mk.sims.atlasCheap.setFault({ kind: 'none' })
    await new Promise((r) => setTimeout(r, 1_050))
    expect((await (await chat(mk.url, mk.key, body())).json()).svc.provider).toBe(P.atlasCheap)
    expect(mk.sims.atlasCheap.stats.requests).toBe(3)
    // The operator's log says when the breaker opened and when it closed, once each.
    expect(log).toEqual([
      `offer ${P.atlasCheap}|svc/atlas@1: breaker opened after 2 failures in a row; next probe in 1 s`,
      `offer ${P.atlasCheap}|svc/atlas@1: breaker closed: an attempt succeeded`,
    ])
  })

  it('sends Retry-After until the earliest breaker half-opens', async () => {
    const mk = await market({ tuning: { breakerFailures: 1, breakerCooldownMs: 4_000 } })
    mk.sims.atlasCheap.setFault({ kind: 'status-500' })
    mk.sims.atlasDear.setFault({ kind: 'status-500' })
    expect((await chat(mk.url, mk.key, body())).status).toBe(503)
    const res = await chat(mk.url, mk.key, body())
    expect(res.status).toBe(503)
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(3)
    expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(4)
    expect(mk.sims.atlasCheap.stats.requests).toBe(1)
  })

  it('respects maxConcurrency: the overflow goes to the next offer', async () => {
    // Streams of about 1.5 s: all six are admitted and routed while atlasCheap's first two still run, even under load.
    const mk = await market({
      sim: { chunkDelayMs: 100 },
      edit: (c) => void (c.providers[0]!.offers[0]!.maxConcurrency = 2),
    })
    const replies = await Promise.all(
      Array.from({ length: 6 }, () => chat(mk.url, mk.key, body({ stream: true })).then(sseEvents)),
    )
    const providers = replies.map((events) => JSON.parse(events.at(-2)!).svc.provider)
    expect(mk.sims.atlasCheap.stats.maxActive).toBeLessThanOrEqual(2)
    expect(providers.filter((p) => p === P.atlasCheap)).toHaveLength(2)
    expect(providers.filter((p) => p === P.atlasDear)).toHaveLength(4)
  })
})

describe('an upstream that overruns max_tokens', () => {
  it('is cut in a stream soon after max_tokens, whatever it goes on sending', async () => {
    // Far more than any buffer between: the upstream would write it all while the client reads.
    const mk = await market({ sim: { replyTokens: 200_000, ignoreMaxTokens: true } })
    const res = await chat(mk.url, mk.key, body({ stream: true, max_tokens: 1000 }))
    const chunks = (await sseEvents(res)).slice(0, -1).map((e) => JSON.parse(e))
    const tokens = chunks.filter((c) => c.choices[0]?.delta?.content).length
    // The simulator's words are 6.7 characters a token: the reply is first counted at 8 a token of the bound, and cut.
    expect(tokens).toBeGreaterThan(1000)
    expect(tokens).toBeLessThanOrEqual(1250)
    expect(chunks.at(-2).usage.completion_tokens).toBe(1000)
    // The upstream's stream was closed, not read to its end.
    await expect.poll(() => mk.sims.atlasCheap.stats.active).toBe(0)
    expect(await mk.store.usage.get(mk.accountId, res.headers.get('x-request-id')!)).toMatchObject({
      outcome: 'completed',
      completionTokens: 1000,
    })
  })

  it.each([false, true])(
    "is billed and reported up to max_tokens at the serving offer's price, not up to the hold (stream %s)",
    async (stream) => {
      const mk = await market({ sim: { replyTokens: 40, ignoreMaxTokens: true } })
      const res = await chat(mk.url, mk.key, body({ stream, max_tokens: 5 }))
      expect(res.status).toBe(200)
      let usage: { prompt_tokens: number; completion_tokens: number }
      let svc: { provider: string; cost_usdc: string }
      if (stream) {
        const chunks = (await sseEvents(res)).slice(0, -1).map((e) => JSON.parse(e))
        // The upstream sent 40 words: the stream is cut once it passed the 5 asked for, and ends as a reply cut by its
        // bound does. The client pays for the 5 at most.
        const words = chunks
          .map((c) => c.choices[0]?.delta?.content ?? '')
          .join('')
          .split(' ')
        expect(words.length).toBeGreaterThan(5)
        expect(words.length).toBeLessThan(9)
        expect(chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean)).toEqual(['length'])
        usage = chunks.find((c) => c.usage).usage
        svc = chunks.at(-1).svc
      } else {
        ;({ usage, svc } = await res.json())
      }
      expect(svc.provider).toBe(P.atlasCheap)
      expect(usage.completion_tokens).toBe(5)
      // The cheap offer's price: the hold was priced at the dearer one, which a cap at the hold alone would have
      // charged.
      const cost = priceOf({ input: 150_000n, output: 600_000n }, usage.prompt_tokens, 5)
      expect(parseUsdc(svc.cost_usdc)).toBe(cost)
      const requestId = res.headers.get('x-request-id')!
      expect(await mk.store.usage.get(mk.accountId, requestId)).toMatchObject({ completionTokens: 5, cost })
      expect((await balance(mk)).held).toBe(0n)
    },
  )
})

describe('client disconnect', () => {
  it('aborts the upstream and charges only what was delivered', async () => {
    const mk = await market({ sim: { chunkDelayMs: 50, replyTokens: 40 } })
    const ac = new AbortController()
    const res = await chat(mk.url, mk.key, body({ stream: true, max_tokens: 40 }), {})
    const reader = res.body!.getReader()
    let seen = ''
    while (!seen.includes('"content":"') || seen.split('"content":"').length < 5)
      seen += new TextDecoder().decode((await reader.read()).value)
    await reader.cancel()
    ac.abort()
    const requestId = res.headers.get('x-request-id')!
    await expect
      .poll(async () => (await mk.store.usage.get(mk.accountId, requestId))?.outcome, { timeout: 5000 })
      .toBe('client_closed')
    const u = (await mk.store.usage.get(mk.accountId, requestId))!
    expect(u.completionTokens).toBeGreaterThanOrEqual(3)
    expect(u.completionTokens).toBeLessThan(40)
    expect(u.cost).toBeGreaterThan(0n)
    await expect.poll(() => mk.sims.atlasCheap.stats.active).toBe(0)
    expect((await balance(mk)).held).toBe(0n)
    const posted = await mk.store.ledger.audit()
    expect(posted.unbalanced).toEqual([])
  })

  it('charges nothing when the client leaves before any content', async () => {
    // Budgets beyond the slow upstream, and an upstream slow enough for the client to leave before it answers.
    const mk = await market({ tuning: { firstByteTimeoutMs: 10_000, replyTimeoutMs: 10_000 } })
    mk.sims.atlasCheap.setFault({ kind: 'slow', ms: 2_000 })
    const ac = new AbortController()
    const pending = chat(mk.url, mk.key, body(), {}).catch(() => null)
    void pending
    const res = fetch(`${mk.url}/v1/chat/completions`, {
      method: 'POST',
      signal: ac.signal,
      headers: { authorization: `Bearer ${mk.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body({ stream: true })),
    }).catch(() => null)
    await expect.poll(() => mk.sims.atlasCheap.stats.active).toBe(2)
    ac.abort()
    await res
    await pending
    await expect
      .poll(async () => (await mk.store.usage.list(mk.accountId, { limit: 5 })).map((u) => u.outcome).sort(), {
        timeout: 5000,
      })
      .toEqual(['client_closed', 'completed'])
    const closed = (await mk.store.usage.list(mk.accountId, { limit: 5 })).find((u) => u.outcome === 'client_closed')!
    expect(closed.cost).toBe(0n)
  })
})

describe('upstream time budgets', () => {
  it('gives a plain reply its whole reply budget, while a stream must start within the first-event budget', async () => {
    // A plain upstream sends nothing until its answer is complete, so it is judged by replyTimeoutMs.
    const mk = await market({ tuning: { firstByteTimeoutMs: 250, replyTimeoutMs: 5_000 } })
    mk.sims.atlasCheap.setFault({ kind: 'slow', ms: 600 })
    const plain = await (await chat(mk.url, mk.key, body())).json()
    expect(plain.svc.provider).toBe(P.atlasCheap)
    const events = await sseEvents(await chat(mk.url, mk.key, body({ stream: true })))
    expect(JSON.parse(events.at(-2)!).svc.provider).toBe(P.atlasDear)
  })

  it('fails a plain attempt over once its reply budget is spent', async () => {
    const mk = await market({ tuning: { firstByteTimeoutMs: 5_000, replyTimeoutMs: 250 } })
    mk.sims.atlasCheap.setFault({ kind: 'slow', ms: 2_000 })
    const plain = await (await chat(mk.url, mk.key, body())).json()
    expect(plain.svc.provider).toBe(P.atlasDear)
  })
})
