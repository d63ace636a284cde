import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORE_KINDS, postgresReachable } from '../../test/helpers/stores.js'
import { closeFixture, openFixture, type StoreFixture } from '../../test/helpers/store-fixture.js'
import { RESPONSE_RETENTION_MS, type KeptResponseRepo } from './kept-responses.js'

describe.each(STORE_KINDS)('kept responses on %s', (kind) => {
  let f: StoreFixture | undefined
  let kept: KeptResponseRepo

  beforeAll(async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    f = await openFixture(kind)
    kept = f.store.keptResponses
  })
  afterAll(() => closeFixture(f))

  it('reads a key its own entries within their retention, and prunes them past it', async () => {
    const t = 1_000_000
    await kept.keep(
      'key_a',
      [
        { id: 'resp_1', body: '[]' },
        { id: 'msg_1', body: '{"type":"message"}' },
      ],
      t,
    )
    await kept.keep('key_a', [{ id: 'resp_2', body: '[1]' }], t + 10)
    // A second keep of the same id changes nothing (a retry of the same response).
    await kept.keep('key_a', [{ id: 'resp_1', body: '["other"]' }], t + 20)
    const read = await kept.read('key_a', ['resp_1', 'msg_1', 'resp_none'], t + 1)
    expect(Object.fromEntries(read)).toEqual({ resp_1: '[]', msg_1: '{"type":"message"}' })
    expect((await kept.read('key_b', ['resp_1'], t + 1)).size).toBe(0)
    expect((await kept.read('key_a', [], t + 1)).size).toBe(0)
    // Past its retention an entry is not read, though not yet pruned.
    const late = t + RESPONSE_RETENTION_MS + 5
    expect([...(await kept.read('key_a', ['resp_1', 'resp_2'], late)).keys()]).toEqual(['resp_2'])
    expect(await kept.prune(late)).toBe(2)
    expect([...(await kept.read('key_a', ['resp_1', 'msg_1', 'resp_2'], t)).keys()]).toEqual(['resp_2'])
  })
})
