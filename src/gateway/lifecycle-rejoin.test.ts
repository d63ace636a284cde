import { afterEach, describe, expect, it } from 'vitest'
import { openStore } from '../store/open.js'
import type { Store } from '../store/store.js'
import { InstanceLifecycle } from './lifecycle.js'

let store: Store | undefined
let life: InstanceLifecycle | undefined
afterEach(async () => {
  await life?.stop()
  await store?.close()
})

describe('an instance another gateway took for dead', () => {
  it('registers again on its next heartbeat, so its holds stay under watch', async () => {
    store = await openStore('sqlite::memory:')
    life = new InstanceLifecycle(store, 'gw_paused', 60_000, Date.now, (err) => {
      throw err
    })
    await life.start()
    // A peer saw a stale heartbeat (a long pause) and removed this instance.
    await store.instances.remove(['gw_paused'])
    await expect.poll(async () => (await store!.instances.list()).map((i) => i.id), { timeout: 5_000 }).toEqual(['gw_paused'])
  })
})
