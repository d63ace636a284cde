import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { chat, marketConfig, USER, type Market } from './helpers/market.js'
import { freshStoreUrl } from './helpers/stores.js'
import { startServer, type RunningServer } from '../src/server.js'
import { openStore } from '../src/store/open.js'
import type { Store } from '../src/store/store.js'
import type { Provider } from '../src/providers/types.js'
import { depositTo, issueKey, openAccount } from '../src/accounts/operations.js'

/** An adapter with a bug: it throws instead of yielding a failure event. */
const broken: Provider = {
  // eslint-disable-next-line require-yield -- an adapter that throws before its first event
  stream: async function* () {
    throw new Error('adapter bug')
  },
  close: async () => {},
}

const nowhere = { url: 'http://127.0.0.1:9/v1' }
const sims = {
  atlasCheap: nowhere,
  atlasDear: nowhere,
  tern: nowhere,
  wren: nowhere,
  quill: nowhere,
  vendor: nowhere,
} as unknown as Market['sims']

let server: RunningServer | undefined
let store: Store | undefined
afterEach(async () => {
  await server?.close()
  await store?.close()
})

/** A gateway whose every upstream is the broken adapter, and a funded key. */
async function serveBroken(tuning: Record<string, number>) {
  const config = marketConfig(sims, freshStoreUrl('sqlite'), tuning)
  store = await openStore(config.store)
  server = await startServer(config, { store, log: () => {}, makeUpstream: () => broken })
  const { account } = await openAccount(store, USER, Date.now())
  await depositTo(store, account.id, 1_000_000n, Date.now())
  await store.accounts.approve(account.id, 1_000_000n)
  return { account, key: (await issueKey({ now: Date.now(), store, accountId: account.id, name: 'test' })).key }
}

/** The store fails the next release (the hold stays open), then works again. */
function failNextRelease(): void {
  const ledger = store!.ledger
  const release = ledger.release.bind(ledger)
  ledger.release = async () => {
    ledger.release = release
    throw new Error('the store went away again')
  }
}

describe('an internal error while serving', () => {
  it('answers 503 with the request id, releases the hold, and leaves no timer writing to the finished response', async () => {
    const { account, key } = await serveBroken({ keepAliveMs: 50 })
    for (const stream of [false, true]) {
      const res = await chat(server!.url, key, {
        model: 'svc/atlas@1',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 10,
        stream,
      })
      expect(res.status).toBe(503)
      expect(res.headers.get('x-request-id')).toMatch(/^req_/)
      expect((await res.json()).error.code).toBe('no_capacity')
      // The record the client is pointed to says what it was answered.
      expect(await store!.usage.get(account.id, res.headers.get('x-request-id')!)).toMatchObject({
        outcome: 'no_capacity',
        cost: 0n,
      })
    }
    expect((await store!.accounts.byId(account.id))!.held).toBe(0n)
    // A keep-alive timer left running would write headers again and throw (an uncaught exception ends the process).
    await sleep(200)
  })

  it('answers 503 with the request id when the store fails to look a key up, and serves once it is back', async () => {
    const { account, key } = await serveBroken({ keyCacheMs: 0 })
    const keys = store!.keys
    const ownerOf = keys.ownerOf.bind(keys)
    keys.ownerOf = async () => {
      throw new Error('the store went away')
    }
    const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 }
    const res = await chat(server!.url, key, body)
    expect(res.status).toBe(503)
    const error = (await res.json()).error
    expect(error.code).toBe('no_capacity')
    expect(error.message).toContain(res.headers.get('x-request-id'))
    expect(await store!.usage.list(account.id, { limit: 10 })).toEqual([])
    keys.ownerOf = ownerOf
    // Looked up again (nothing cached), the key passes: the broken adapter answers, through the whole path.
    expect((await chat(server!.url, key, body)).status).toBe(503)
    expect((await store!.usage.list(account.id, { limit: 10 })).length).toBe(1)
  })

  it('releases a hold the store wrote before failing to answer for it', async () => {
    const { account, key } = await serveBroken({})
    const ledger = store!.ledger
    const hold = ledger.hold.bind(ledger)
    ledger.hold = async (h) => {
      await hold(h)
      throw new Error('the store went away after writing')
    }
    const res = await chat(server!.url, key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 10,
    })
    expect(res.status).toBe(503)
    expect((await res.json()).error.message).toContain(res.headers.get('x-request-id'))
    expect(await store!.usage.get(account.id, res.headers.get('x-request-id')!)).toMatchObject({
      outcome: 'no_capacity',
      cost: 0n,
    })
    expect((await store!.accounts.byId(account.id))!.held).toBe(0n)
  })

  it('lets a hold whose release failed run out its lease instead of keeping it alive', async () => {
    const { account, key } = await serveBroken({ holdTtlSeconds: 5 })
    failNextRelease()
    const res = await chat(server!.url, key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 10,
    })
    expect(res.status).toBe(503)
    const requestId = res.headers.get('x-request-id')!
    const lease = () => store!.ledger.leaseOf(requestId)
    const before = lease()!
    await sleep(5)
    // The heartbeat extends the leases of the requests the gateway is serving: this one is over.
    await server!.gateway.lifecycle.heartbeat()
    expect(lease()).toBe(before)
    expect(server!.gateway.lifecycle.inFlight).toBe(0)
    expect(await store!.ledger.releaseExpired(before + 1)).toBe(1)
    expect(lease()).toBeUndefined()
    expect((await store!.accounts.byId(account.id))!.held).toBe(0n)
    expect(await store!.usage.get(account.id, requestId)).toMatchObject({ outcome: 'expired', cost: 0n })
  })

  it("returns a hold whose release failed as the gateway stops, not at a peer's later sweep", async () => {
    const { account, key } = await serveBroken({ holdTtlSeconds: 600 })
    failNextRelease()
    expect(
      (
        await chat(server!.url, key, {
          model: 'svc/atlas@1',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 10,
        })
      ).status,
    ).toBe(503)
    expect((await store!.accounts.byId(account.id))!.held).toBeGreaterThan(0n)
    await server!.close()
    server = undefined
    expect((await store!.accounts.byId(account.id))!.held).toBe(0n)
    expect(await store!.ledger.openHolds()).toBe(0)
    // Its counter is dead, holding nothing, until the store closes (a hold of the stopped instance arriving late is
    // refused by it); then it goes.
    const counters = async () =>
      (await store!.db.selectFrom('owner_holds').select(['held', 'open', 'dead']).execute()).map((c) =>
        [c.held, c.open, c.dead].map(Number),
      )
    expect(await counters()).toEqual([[0, 0, 1]])
    await store!.ledger.forgetRetired()
    expect(await counters()).toEqual([])
    expect(await store!.ledger.audit()).toMatchObject({ unbalanced: [], inconsistent: [] })
  })
})
