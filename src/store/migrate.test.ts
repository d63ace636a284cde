import { describe, expect, it } from 'vitest'
import { openStore } from './open.js'
import { dropSchema, freshPostgresUrl, postgresReachable } from '../../test/helpers/stores.js'

describe('migrations on postgres', () => {
  it('migrate a fresh schema while another store of the same database is open', async (ctx) => {
    if (!(await postgresReachable())) return ctx.skip()
    const urls = [freshPostgresUrl(), freshPostgresUrl()]
    const first = await openStore(urls[0]!)
    try {
      // Kysely found the first schema's migration tables and skipped creating the second's before the fix.
      const second = await openStore(urls[1]!)
      expect(await second.accounts.byAddress('svc:fees')).toBeDefined()
      await second.close()
    } finally {
      await first.close()
      for (const url of urls) await dropSchema(url)
    }
  })
})
