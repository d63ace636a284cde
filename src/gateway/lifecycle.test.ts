import { describe, expect, it } from 'vitest'
import { deadInstances } from './lifecycle.js'

const self = { id: 'me', host: 'h1', pid: process.pid }
const NOW = 1_000_000

describe('deadInstances', () => {
  it('keeps live instances on other hosts and this host', () => {
    const all = [
      { id: 'me', host: 'h1', pid: process.pid, startedAt: 0, heartbeatAt: NOW },
      { id: 'other-host', host: 'h2', pid: 99_999_999, startedAt: 0, heartbeatAt: NOW - 1_000 },
      // process.ppid is alive: a sibling on this host.
      { id: 'sibling', host: 'h1', pid: process.ppid, startedAt: 0, heartbeatAt: NOW - 1_000 },
    ]
    expect(deadInstances(all, self, NOW)).toEqual([])
  })

  it('finds stale heartbeats anywhere, and dead or reused pids on this host at once', () => {
    const all = [
      { id: 'stale', host: 'h2', pid: 1, startedAt: 0, heartbeatAt: NOW - 60_000 },
      { id: 'killed', host: 'h1', pid: 2 ** 22 + 12345, startedAt: 0, heartbeatAt: NOW - 100 },
      { id: 'my-pid-before-restart', host: 'h1', pid: process.pid, startedAt: 0, heartbeatAt: NOW - 100 },
    ]
    expect(deadInstances(all, self, NOW).sort()).toEqual(['killed', 'my-pid-before-restart', 'stale'])
  })
})
