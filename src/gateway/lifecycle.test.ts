import { existsSync, readFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { describe, expect, it } from 'vitest'
import { HeartbeatWatch, hostIdentity } from './lifecycle.js'

const self = { id: 'me', host: 'h1', pid: process.pid }
const NOW = 1_000_000

describe('HeartbeatWatch', () => {
  it('keeps live instances on other hosts and this host', () => {
    const all = [
      { id: 'me', host: 'h1', pid: process.pid, startedAt: 0, heartbeatAt: NOW },
      { id: 'other-host', host: 'h2', pid: 99_999_999, startedAt: 0, heartbeatAt: NOW - 1_000 },
      // process.ppid is alive: a sibling on this host.
      { id: 'sibling', host: 'h1', pid: process.ppid, startedAt: 0, heartbeatAt: NOW - 1_000 },
    ]
    expect(new HeartbeatWatch().dead(all, self, NOW)).toEqual([])
  })

  it('finds dead or reused pids on this host at once, and a heartbeat that stopped once this clock saw it stand still for 15 s', () => {
    const watch = new HeartbeatWatch()
    const all = [
      { id: 'stopped', host: 'h2', pid: 1, startedAt: 0, heartbeatAt: NOW - 60_000 },
      { id: 'killed', host: 'h1', pid: 2 ** 22 + 12345, startedAt: 0, heartbeatAt: NOW - 100 },
      { id: 'my-pid-before-restart', host: 'h1', pid: process.pid, startedAt: 0, heartbeatAt: NOW - 100 },
    ]
    expect(watch.dead(all, self, NOW).sort()).toEqual(['killed', 'my-pid-before-restart'])
    expect(watch.dead(all, self, NOW + 15_000).sort()).toEqual(['killed', 'my-pid-before-restart'])
    expect(watch.dead(all, self, NOW + 15_001).sort()).toEqual(['killed', 'my-pid-before-restart', 'stopped'])
  })

  it('keeps a peer whose clock runs minutes behind, at first sight too: only a heartbeat standing still is death', () => {
    const watch = new HeartbeatWatch()
    const peer = (t: number) => [{ id: 'behind', host: 'h2', pid: 1, startedAt: 0, heartbeatAt: t - 130_000 }]
    for (let t = NOW; t <= NOW + 30_000; t += 5_000) expect(watch.dead(peer(t), self, t)).toEqual([])
    expect(watch.dead(peer(NOW + 30_000), self, NOW + 45_001)).toEqual(['behind'])
  })

  it('keeps a peer whose clock runs ahead or behind for as long as its heartbeat moves', () => {
    const watch = new HeartbeatWatch()
    const peers = (t: number) => [
      { id: 'ahead', host: 'h2', pid: 1, startedAt: 0, heartbeatAt: t + 20_000 },
      { id: 'behind', host: 'h3', pid: 1, startedAt: 0, heartbeatAt: t - 40_000 },
    ]
    for (let t = NOW; t <= NOW + 60_000; t += 5_000) expect(watch.dead(peers(t), self, t)).toEqual([])
    // The peer that ran ahead stops: 15 s of this clock later it is dead, though its last heartbeat is in this clock's
    // future.
    const stopped = peers(NOW + 60_000)
    expect(watch.dead(stopped, self, NOW + 75_000)).toEqual([])
    expect(watch.dead(stopped, self, NOW + 80_000)).toEqual(['ahead', 'behind'])
  })

  it('forgets peers that are no longer registered, and watches a returning one afresh', () => {
    const watch = new HeartbeatWatch()
    const peer = { id: 'p', host: 'h2', pid: 1, startedAt: 0, heartbeatAt: NOW }
    expect(watch.dead([peer], self, NOW)).toEqual([])
    expect(watch.dead([], self, NOW + 20_000)).toEqual([])
    expect(watch.dead([peer], self, NOW + 30_000)).toEqual([])
    expect(watch.dead([peer], self, NOW + 45_001)).toEqual(['p'])
  })

  it.skipIf(!existsSync('/proc/sys/kernel/random/boot_id'))(
    'names this host by its boot too: machines cloned from one image share a host name and a pid namespace',
    () => {
      const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
      expect(hostIdentity().startsWith(`${hostname()}/${boot}/`)).toBe(true)
    },
  )
})
