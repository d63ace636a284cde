import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, chatWith, sseEvents, startMarket, type Market } from './helpers/market.js'

let m: Market
beforeAll(async () => {
  m = await startMarket()
})
afterAll(() => m?.close())

const body = (content: string, extra: Record<string, unknown> = {}) => ({
  model: 'svc/atlas@1',
  messages: [{ role: 'user', content }],
  max_tokens: 16,
  ...extra,
})
const withKey = (key: string) => ({ 'idempotency-key': key })
const balance = async () => (await m.store.accounts.byId(m.accountId))!.balance

async function errorOf(res: Response) {
  expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  return (await res.json()).error
}

describe('Idempotency-Key', () => {
  it('sends a finished plain reply again, charged once', async () => {
    const before = await balance()
    const first = await chat(m.url, m.key, body('once'), withKey('k-plain'))
    expect(first.status).toBe(200)
    const text = await first.text()
    const charged = before - (await balance())
    expect(charged).toBeGreaterThan(0n)
    const again = await chat(m.url, m.key, body('once'), withKey('k-plain'))
    expect(again.status).toBe(200)
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect(await again.text()).toBe(text)
    expect(before - (await balance())).toBe(charged)
  })

  it('refuses the same key with another body (409), naming the first request', async () => {
    const first = await chat(m.url, m.key, body('one'), withKey('k-body'))
    const id = JSON.parse(await first.text()).svc.request_id
    const res = await chat(m.url, m.key, body('two'), withKey('k-body'))
    expect(res.status).toBe(409)
    const e = await errorOf(res)
    expect(e.param).toBe('Idempotency-Key')
    expect(e.message).toContain(id)
    expect(e.message).toContain('another body')
  })

  it('refuses a repeat while the first is in flight (409), and charges the first only', async () => {
    m.sims.atlasCheap.setFault({ kind: 'slow', ms: 300 })
    m.sims.atlasDear.setFault({ kind: 'slow', ms: 300 })
    try {
      const before = await balance()
      const first = chat(m.url, m.key, body('slow'), withKey('k-flight'))
      await new Promise((r) => setTimeout(r, 100))
      const res = await chat(m.url, m.key, body('slow'), withKey('k-flight'))
      expect(res.status).toBe(409)
      expect((await errorOf(res)).message).toMatch(/still being served/)
      expect((await first).status).toBe(200)
      expect(await balance()).toBeLessThan(before)
    } finally {
      m.sims.atlasCheap.setFault({ kind: 'none' })
      m.sims.atlasDear.setFault({ kind: 'none' })
    }
  })

  it('refuses to replay a stream (409) and names its usage record', async () => {
    const first = await chat(m.url, m.key, body('stream', { stream: true }), withKey('k-stream'))
    const events = await sseEvents(first)
    const id = JSON.parse(events.at(-2)!).svc.request_id
    const res = await chat(m.url, m.key, body('stream', { stream: true }), withKey('k-stream'))
    expect(res.status).toBe(409)
    expect((await errorOf(res)).message).toContain(`GET /v1/usage/${id}`)
  })

  it('lets a retry run when the first charged nothing', async () => {
    m.sims.atlasCheap.setFault({ kind: 'status-500' })
    m.sims.atlasDear.setFault({ kind: 'status-500' })
    let failed: Response
    try {
      failed = await chat(m.url, m.key, body('retry me'), withKey('k-retry'))
    } finally {
      m.sims.atlasCheap.setFault({ kind: 'none' })
      m.sims.atlasDear.setFault({ kind: 'none' })
    }
    expect(failed.status).toBe(503)
    // The failure may have opened the breakers: wait until the model serves again.
    await expect
      .poll(async () => (await chat(m.url, m.key, body('probe'))).status, { timeout: 10_000, interval: 250 })
      .toBe(200)
    const retry = await chat(m.url, m.key, body('retry me'), withKey('k-retry'))
    expect(retry.status).toBe(200)
    expect(retry.headers.get('idempotent-replayed')).toBeNull()
  })

  it('keys are per API key: another key with the same Idempotency-Key runs its own request', async () => {
    const { issueKey } = await import('../src/accounts/operations.js')
    const other = (await issueKey({ now: Date.now(), store: m.store, accountId: m.accountId, name: 'other' })).key
    const a = await chat(m.url, m.key, body('shared'), withKey('k-shared'))
    const b = await chat(m.url, other, body('shared'), withKey('k-shared'))
    expect(b.status).toBe(200)
    expect(b.headers.get('idempotent-replayed')).toBeNull()
    expect(JSON.parse(await b.text()).svc.request_id).not.toBe(JSON.parse(await a.text()).svc.request_id)
  })

  it('refuses a key of no usable shape, naming the header', async () => {
    const res = await chat(m.url, m.key, body('x'), withKey('x'.repeat(300)))
    expect(res.status).toBe(400)
    expect((await errorOf(res)).param).toBe('Idempotency-Key')
  })

  // The state a crash between the capture and the reply leaves: charged, the reply never stored nor sent.
  it('refuses a retry of a request charged whose reply was lost, naming its record; charged once', async () => {
    const repo = m.store.idempotency
    const finish = repo.finish.bind(repo)
    repo.finish = () => new Promise(() => {})
    const before = await balance()
    const aborted = new AbortController()
    const first = chatWith(m.url, m.key, body('lost reply'), {
      headers: withKey('k-lost'),
      signal: aborted.signal,
    }).catch(() => undefined)
    try {
      await expect.poll(async () => before - (await balance())).toBeGreaterThan(0n)
    } finally {
      aborted.abort()
      await first
      repo.finish = finish
    }
    const charged = before - (await balance())
    const res = await chat(m.url, m.key, body('lost reply'), withKey('k-lost'))
    expect(res.status).toBe(409)
    expect((await errorOf(res)).message).toMatch(/was charged but whose reply was lost; GET \/v1\/usage\/req_/)
    expect(before - (await balance())).toBe(charged)
  })
})
