import { fdatasync, fdatasyncSync } from 'node:fs'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { openStore } from '../open.js'
import type { Store } from '../store.js'
import { SYSTEM_ACCOUNTS } from '../accounts.js'
import type { SyncWays } from './engine/wal-sync.js'
import { ONE_AT_A_TIME } from './engine/one-at-a-time.js'
import { freshSqliteUrl } from '../../../test/helpers/stores.js'
import { usageRecord } from '../../../test/helpers/store-fixture.js'
import { ledgerOps } from '../../../test/helpers/ledger-ops.js'

/**
 * A WAL sync the test finishes by hand, never on the event loop: `syncs` counts those begun, `onStart` runs as each
 * begins, `finish` ends the oldest (with a real fdatasync, or failing it).
 */
function manualSync() {
  const pending: ((err: NodeJS.ErrnoException | null) => void)[] = []
  const sync = {
    syncs: 0,
    onStart: () => {},
    ways: {
      background: (fd, done) => {
        sync.syncs++
        sync.onStart()
        pending.push((err) => (err ? done(err) : fdatasync(fd, done)))
      },
      inline: null,
    } as SyncWays,
    get waiting() {
      return pending.length
    },
    finish(err: NodeJS.ErrnoException | null = null) {
      pending.shift()!(err)
    },
  }
  return sync
}

const tick = () => new Promise((resolve) => setImmediate(resolve))
const settled = async <T>(p: Promise<T>): Promise<'pending' | 'resolved' | 'rejected'> => {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending'
  p.then(
    () => (state = 'resolved'),
    () => (state = 'rejected'),
  )
  for (let i = 0; i < 5; i++) await tick()
  return state
}

/** The SQLite file's ledger runs on the event loop's connection; captures wait for the WAL's sync on libuv's pool. */
describe('the hot ledger of a SQLite file', () => {
  let store: Store | undefined
  let url: string
  let ids: { user: number; other: number; payee: number; fees: number }
  afterEach(async () => {
    await store?.close()
    store = undefined
  })

  async function open(sync?: SyncWays): Promise<Store> {
    url = freshSqliteUrl()
    store = await openStore(url, () => 1000, sync ? { sync } : {})
    const id = async (address: string, kind: 'user' | 'provider') =>
      (await store!.accounts.ensure(address, kind, 1000)).account.id
    ids = {
      user: await id('0x1111111111111111111111111111111111111111', 'user'),
      other: await id('0x3333333333333333333333333333333333333333', 'user'),
      payee: await id('0x2222222222222222222222222222222222222222', 'provider'),
      fees: (await store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!.id,
    }
    for (const account of [ids.user, ids.other]) {
      await store.accounts.deposit({ id: account, amount: 10n ** 9n, ref: `dep_${account}`, now: 1000 })
      await store.accounts.approve(account, 10n ** 9n)
    }
    return store
  }

  const { hold, capture, serve, status } = ledgerOps(() => ({ ids, url }))

  it('answers a hold once committed, and a capture only once a WAL sync that began after its commit has ended', async () => {
    const sync = manualSync()
    const s = await open(sync.ways)
    // What each sync found committed as it began.
    const seen: (string | null)[][] = []
    sync.onStart = () => seen.push([status('r1'), status('r2')])
    expect(await hold(s, 'r1')).toEqual({ ok: true })
    expect(sync.syncs).toBe(0)
    const first = capture(s, 'r1')
    expect(await settled(first)).toBe('pending')
    expect(seen).toEqual([['captured', null]])
    // Held while the first sync is on the disk: the second capture commits only once it ended, then waits for its own.
    expect(await hold(s, 'r2')).toEqual({ ok: true })
    const second = capture(s, 'r2')
    expect(await settled(second)).toBe('pending')
    // An open hold has no row yet (it is only counted): the capture's row is not committed.
    expect(status('r2')).toBeNull()
    sync.finish()
    expect(await first).toBe(true)
    expect(await settled(second)).toBe('pending')
    expect(seen).toEqual([
      ['captured', null],
      ['captured', 'captured'],
    ])
    sync.finish()
    expect(await second).toBe(true)
    expect(await s.ledger.audit()).toEqual({ unbalanced: [], inconsistent: [], openHolds: 0 })
  })

  it('syncs a capture on the event loop while requests come one at a time, on the pool otherwise', async () => {
    const used = { inline: 0, background: 0 }
    let serving = ''
    // What each inline sync found committed of the capture it makes durable.
    const found: (string | null)[] = []
    const s = await open({
      inline: (fd) => (used.inline++, found.push(status(serving)), fdatasyncSync(fd)),
      background: (fd, done) => (used.background++, fdatasync(fd, done)),
    })
    let n = 0
    const oneAtATime = async (count: number) => {
      for (let i = 0; i < count; i++) expect(await serve(s, (serving = `one_${n++}`))).toBe(true)
    }
    await oneAtATime(ONE_AT_A_TIME)
    expect(used).toEqual({ inline: 0, background: ONE_AT_A_TIME })
    await oneAtATime(2)
    expect(used).toEqual({ inline: 2, background: ONE_AT_A_TIME })
    const since = (before: typeof used) => ({
      inline: used.inline - before.inline,
      background: used.background - before.background,
    })
    const company = async (what: () => Promise<unknown>) => {
      const before = { ...used }
      await what()
      expect(since(before)).toEqual({ inline: 0, background: 1 })
      await oneAtATime(ONE_AT_A_TIME)
      expect(since(before)).toEqual({ inline: 0, background: 1 + ONE_AT_A_TIME })
      await oneAtATime(1)
      expect(since(before)).toEqual({ inline: 1, background: 1 + ONE_AT_A_TIME })
    }
    // Another request admitted and not yet settled: its reply could arrive while the disk flushes.
    expect(await hold(s, 'first')).toEqual({ ok: true })
    const before = { ...used }
    expect(await serve(s, 'second')).toBe(true)
    expect(since(before)).toEqual({ inline: 0, background: 1 })
    // None in flight any more, but another was admitted during its life: more may be on their way.
    await company(() => capture(s, 'first'))
    // Two captures of one group, the last admitted first.
    expect(await Promise.all([hold(s, 'a'), hold(s, 'b')])).toEqual([{ ok: true }, { ok: true }])
    await company(() => Promise.all([capture(s, 'b'), capture(s, 'a')]))
    // A hold released (by a sweep, say) is no longer in flight.
    expect(await hold(s, 'swept')).toEqual({ ok: true })
    expect(await s.ledger.release('swept', 1000, usageRecord('swept', ids.user, 0n, { outcome: 'expired' }))).toBe(true)
    const last = { ...used }
    await oneAtATime(1)
    expect(since(last)).toEqual({ inline: 1, background: 0 })
    // Each inline sync began after its capture had committed.
    expect(found).toEqual(found.map(() => 'captured'))
    expect(found.length).toBe(used.inline)
  })

  it('refuses a capture whose sync on the event loop failed, and every write after it', async () => {
    const s = await open({
      inline: () => {
        throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })
      },
      background: fdatasync,
    })
    for (let i = 0; i < ONE_AT_A_TIME; i++) expect(await serve(s, `one_${i}`)).toBe(true)
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {})
    try {
      await expect(serve(s, 'r1')).rejects.toThrow(/cannot write to disk \(EIO/)
      await expect(hold(s, 'r2')).rejects.toThrow(/cannot write to disk/)
      await expect(s.accounts.approve(ids.user, 1n)).rejects.toThrow(/readonly/)
      expect(logged).toHaveBeenCalledTimes(1)
    } finally {
      logged.mockRestore()
    }
  })

  /** Holds r0 and r1, and captures r0: its sync is on the disk (unfinished) when this resolves. */
  async function syncUnderWay() {
    const sync = manualSync()
    const s = await open(sync.ways)
    for (const id of ['r0', 'r1']) expect(await hold(s, id)).toEqual({ ok: true })
    const first = capture(s, 'r0')
    expect(await settled(first)).toBe('pending')
    expect(sync.syncs).toBe(1)
    return { sync, s, first }
  }

  it('keeps a release behind a capture of the same hold queued before it while a sync is on the disk', async () => {
    const { sync, s, first } = await syncUnderWay()
    // A sweeper's release of r1 queued after r1's capture: the capture wins, the release finds the hold closed.
    const captured = capture(s, 'r1')
    const released = s.ledger.release('r1', 1000, usageRecord('r1', ids.user, 0n, { outcome: 'expired' }))
    sync.finish()
    await first
    expect(await released).toBe(false)
    sync.finish()
    expect(await captured).toBe(true)
    expect(status('r1')).toBe('captured')
  })

  it('closes once every operation settled, captures held back for a sync included', async () => {
    const { sync, s, first } = await syncUnderWay()
    const second = capture(s, 'r1')
    const closed = s.close()
    store = undefined
    expect(await settled(closed)).toBe('pending')
    sync.finish()
    expect(await first).toBe(true)
    expect(await settled(closed)).toBe('pending')
    sync.finish()
    expect(await second).toBe(true)
    await closed
    expect(status('r1')).toBe('captured')
  })

  it('refuses the captures a failed sync covered, and every write after it', async () => {
    const sync = manualSync()
    const s = await open(sync.ways)
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {})
    try {
      expect(await hold(s, 'r1')).toEqual({ ok: true })
      expect(await hold(s, 'r2')).toEqual({ ok: true })
      const first = capture(s, 'r1')
      expect(await settled(first)).toBe('pending')
      const second = capture(s, 'r2')
      sync.finish(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }))
      await expect(first).rejects.toThrow(/cannot write to disk \(EIO/)
      await expect(second).rejects.toThrow(/cannot write to disk/)
      expect(status('r2')).toBeNull()
      await expect(hold(s, 'r3')).rejects.toThrow(/cannot write to disk/)
      // The store's other writes stop too; reads go on.
      const cap = (await s.accounts.byId(ids.user))!.cap
      await expect(s.accounts.approve(ids.user, 1n)).rejects.toThrow(/readonly/)
      expect((await s.accounts.byId(ids.user))!.cap).toBe(cap)
      expect(sync.waiting).toBe(0)
      expect(logged).toHaveBeenCalledWith(expect.stringMatching(/cannot write to disk/))
    } finally {
      logged.mockRestore()
    }
  })
})
