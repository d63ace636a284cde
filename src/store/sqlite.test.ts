import { describe, expect, it } from 'vitest'
import { WalSync } from './sqlite.js'

/** A WalSync whose fdatasync calls are settled by the test, one at a time. */
function controlled() {
  const sync = new WalSync('/unused')
  const calls: { resolve: () => void; reject: (e: Error) => void }[] = []
  Object.assign(sync, { run: () => new Promise<void>((resolve, reject) => calls.push({ resolve, reject })) })
  return { sync, calls }
}

describe('WalSync', () => {
  it('recovers from a failed fdatasync: a waiter queued behind it gets a sync of its own, and so do later ones', async () => {
    const { sync, calls } = controlled()
    const first = sync.sync()
    const queued = sync.sync()
    calls[0]!.reject(new Error('EIO'))
    await expect(first).rejects.toThrow('EIO')
    // The commits of the queued waiter may have missed the failed sync: it needs one that succeeds.
    await expect.poll(() => calls.length).toBe(2)
    const behind = sync.sync()
    calls[1]!.resolve()
    await expect(queued).resolves.toBeUndefined()
    await expect.poll(() => calls.length).toBe(3)
    calls[2]!.resolve()
    await expect(behind).resolves.toBeUndefined()
  })
})
