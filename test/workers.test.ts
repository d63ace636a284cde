import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { Agent } from 'undici'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../src/store/open.js'
import type { Store } from '../src/store/store.js'
import { marketConfig, addressOf, startSims, type Market } from './helpers/market.js'
import { checkInvariants, fundedKey, maxCostFor } from './helpers/money.js'
import { daemon, svc, type Daemon, LISTENING } from './helpers/cli.js'
import { dropSchema, freshStoreUrl, postgresReachable, STORE_KINDS } from './helpers/stores.js'

type Sims = Market['sims']

const N = 6
const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'spend it all' }], max_tokens: 40 }

/**
 * The connections this test's requests go on: new for each test, and again once a worker is killed, so that none the
 * dead worker had accepted (or was being handed as it died, which node:cluster loses with it) is used again.
 */
let client = new Agent()
const get = (url: string) => fetch(url, { dispatcher: client } as RequestInit)
const ask = (url: string, key: string, b: unknown) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(b),
    dispatcher: client,
  } as RequestInit)

interface Listening {
  base_url: string
  metrics_url: string | null
  pid: number
  workers: number[]
}

/** The JSON log lines the server wrote so far (its workers' and its primary's, one stream). */
const lines = (d: Daemon) =>
  d
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)

/** The sum of a metric's series, over every label set, in a Prometheus text page. */
function total(page: string, name: string, match = ''): number {
  return page
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) && l.includes(match))
    .reduce((s, l) => s + Number(l.split(' ').at(-1)), 0)
}

/**
 * `svc serve --workers 2`: two processes forked by one primary share the port, each with its own store connection.
 * Money stays exact across them (one store decides every hold), the server has one `/metrics`, one log stream and one
 * `/readyz`, a worker killed mid-stream has its holds released and is replaced, and SIGTERM drains them all.
 */
describe.each(STORE_KINDS)('svc serve --workers 2 on %s', (kind) => {
  let sims: Sims
  let storeUrl: string
  let store: Store
  let file: string
  let d: Daemon
  let at: Listening
  beforeEach(() => {
    client = new Agent()
  })
  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    sims = await startSims({ chunkDelayMs: 50, replyTokens: 40 })
    storeUrl = freshStoreUrl(kind)
    store = await openStore(storeUrl)
    const config = {
      ...marketConfig(sims, storeUrl, {
        firstByteTimeoutMs: 20_000,
        replyTimeoutMs: 20_000,
        keyCacheMs: 0,
        shutdownGraceMs: 10_000,
      }),
      metrics: { host: '127.0.0.1', port: 0 },
    }
    file = join(mkdtempSync(join(tmpdir(), 'svc-workers-')), 'config.json')
    writeFileSync(file, JSON.stringify(config))
    d = await daemon(['serve', '--config', file, '--workers', '2'], LISTENING)
    at = lines(d).find((l) => l.msg === 'listening') as unknown as Listening
  }, 60_000)
  afterAll(async () => {
    await d?.stop()
    await store?.close()
    if (sims) await Promise.all(Object.values(sims).map((s) => s.close()))
    if (kind === 'postgres' && storeUrl) await dropSchema(storeUrl)
  })

  it('listens once for both workers, and is ready only when both are', async () => {
    expect(at.workers).toHaveLength(2)
    expect(at.workers).not.toContain(at.pid)
    expect(lines(d).filter((l) => l.msg === 'listening')).toHaveLength(1)
    const ready = await get(`${at.base_url}/readyz`)
    expect(ready.status).toBe(200)
    expect(await ready.json()).toEqual({ status: 'ready' })
  })

  it(`admits ${N} of ${4 * N} requests funded for ${N} across both workers; one /metrics counts them all`, async () => {
    const config = marketConfig(sims, storeUrl, {})
    const max = maxCostFor(config, body)
    const funds = max * BigInt(N)
    const { accountId, key } = await fundedKey(store, addressOf(0x61), funds)
    // Admitted requests wait at the provider until every one of the 4N is decided, so no capture frees room early.
    for (const s of [sims.atlasCheap, sims.atlasDear]) s.setFault({ kind: 'stall' })
    const waiting = () => sims.atlasCheap.stats.active + sims.atlasDear.stats.active
    let refused = 0
    const pending = Array.from({ length: 4 * N }, () =>
      ask(at.base_url, key, body).then((r) => {
        if (r.status === 402) refused++
        return r
      }),
    )
    await expect.poll(() => refused + waiting(), { timeout: 20_000 }).toBe(4 * N)
    expect(waiting()).toBe(N)
    for (const s of [sims.atlasCheap, sims.atlasDear]) s.setFault({ kind: 'none' })
    const responses = await Promise.all(pending)
    const bodies = await Promise.all(responses.map((r) => r.json()))
    expect(responses.filter((r) => r.status === 200)).toHaveLength(N)
    expect(responses.filter((r) => r.status === 402)).toHaveLength(3 * N)
    for (const b of bodies.filter((x) => x.error)) expect(b.error.code).toBe('insufficient_quota')
    // Both workers served: the access lines of the one log stream say which worker answered each request.
    const ids = new Set(responses.map((r) => r.headers.get('x-request-id')))
    const access = () => lines(d).filter((l) => l.msg === 'request' && ids.has(l.req_id as string))
    // (A worker writes its log lines in blocks, at least once a second.)
    await expect.poll(() => access().length, { timeout: 5_000 }).toBe(4 * N)
    expect(new Set(access().map((l) => l.worker))).toEqual(new Set([0, 1]))
    const account = (await store.accounts.byId(accountId))!
    expect(account.held).toBe(0n)
    const { captured } = await checkInvariants(store, accountId, funds)
    const charged = bodies
      .filter((b) => b.svc)
      .reduce((s, b) => s + BigInt(Math.round(Number(b.svc.cost_usdc) * 1e6)), 0n)
    expect(captured).toBe(charged)
    // The primary's /metrics sums the workers' counters: every completed request, whichever worker served it.
    const page = await (await get(at.metrics_url!)).text()
    expect(total(page, 'svc_requests_total', 'outcome="completed"')).toBe(N)
    expect(total(page, 'svc_charged_usdc_total')).toBeCloseTo(Number(charged) / 1e6, 6)
  }, 60_000)

  it('replaces a worker killed mid-stream; its holds are released, charged nothing, and the other serves on', async () => {
    const funds = 10_000_000n
    const { accountId, key } = await fundedKey(store, addressOf(0x62), funds)
    const done = [await (await ask(at.base_url, key, { ...body, max_tokens: 3 })).json()]
    // Streams until the worker to kill serves at least one (connections are dealt to the workers in turn).
    const streams: { id: string; reader: ReadableStreamDefaultReader<Uint8Array> }[] = []
    const owners = async () => {
      const rows = await store.db
        .selectFrom('requests_in_flight as r')
        .innerJoin('instances as i', 'i.id', 'r.owner')
        .select(['r.request_id', 'i.pid'])
        .execute()
      return new Map(rows.map((r) => [r.request_id, Number(r.pid)]))
    }
    for (let i = 0; i < 4; i++) {
      const res = await ask(at.base_url, key, { ...body, stream: true })
      const reader = res.body!.getReader()
      let seen = ''
      while (!/"content":"[A-Za-z ]/.test(seen)) seen += new TextDecoder().decode((await reader.read()).value)
      streams.push({ id: res.headers.get('x-request-id')!, reader })
    }
    await expect.poll(async () => (await owners()).size, { timeout: 10_000 }).toBe(streams.length)
    const byPid = await owners()
    const victim = at.workers.find((pid) => [...byPid.values()].includes(pid))!
    const cut = streams.filter((s) => byPid.get(s.id) === victim)
    expect(cut.length).toBeGreaterThan(0)
    process.kill(victim, 'SIGKILL')
    for (const s of cut) await s.reader.cancel().catch(() => {})
    // Once the primary has seen the death, the other worker serves on (on new connections) while another starts in
    // the victim's place.
    const died = () => lines(d).some((l) => l.level === 40 && String(l.msg).includes('killed by SIGKILL'))
    await expect.poll(died, { timeout: 5_000 }).toBe(true)
    client = new Agent()
    const during = await ask(at.base_url, key, { ...body, max_tokens: 3 })
    expect(during.status).toBe(200)
    done.push(await during.json())
    // The victim's requests are cut off and charged nothing; the living worker's streams finish and are charged.
    for (const s of cut)
      await expect
        .poll(async () => (await store.usage.get(accountId, s.id))?.outcome, { timeout: 10_000 })
        .toBe('cut_off')
    for (const s of cut) expect((await store.usage.get(accountId, s.id))!.cost).toBe(0n)
    for (const s of streams.filter((x) => !cut.includes(x))) {
      while (!(await s.reader.read()).done);
      done.push({ svc: { cost_usdc: Number((await store.usage.get(accountId, s.id))!.cost) / 1e6 } })
    }
    await expect.poll(async () => (await store.accounts.byId(accountId))!.held, { timeout: 10_000 }).toBe(0n)
    // The server is ready again once the new worker listens.
    await expect.poll(async () => (await get(`${at.base_url}/readyz`)).status, { timeout: 20_000 }).toBe(200)
    const { captured } = await checkInvariants(store, accountId, funds)
    expect(captured).toBe(done.reduce((s, x) => s + BigInt(Math.round(Number(x.svc.cost_usdc) * 1e6)), 0n))
    expect(await store.ledger.openHolds()).toBe(0)
  }, 60_000)

  it('drains every worker on SIGTERM: a stream in flight finishes, then the server stops', async () => {
    const { accountId, key } = await fundedKey(store, addressOf(0x63), 10_000_000n)
    const res = await ask(at.base_url, key, { ...body, stream: true })
    const reader = res.body!.getReader()
    await reader.read()
    const stopped = d.stop('SIGTERM')
    let text = ''
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value)
    expect(text).toContain('data: [DONE]')
    await stopped
    expect(d.child.exitCode).toBe(0)
    expect(lines(d).filter((l) => l.msg === 'stopped').length).toBeGreaterThanOrEqual(3)
    const usage = await store.usage.get(accountId, res.headers.get('x-request-id')!)
    expect(usage?.outcome).toBe('completed')
    await expect(get(`${at.base_url}/healthz`)).rejects.toThrow()
  }, 60_000)
})

describe('svc serve --workers', () => {
  it('refuses a count it cannot run, in words', async () => {
    for (const [n, why] of [
      ['0', '--workers must be at least 1, got 0'],
      ['two', '--workers must be a whole number from 0 to 64, got two'],
      ['65', '--workers must be a whole number from 0 to 64, got 65'],
    ]) {
      const r = await svc(['serve', '--workers', n!])
      expect(r.code).toBe(1)
      expect(r.stderr).toContain(why)
    }
  })
})
