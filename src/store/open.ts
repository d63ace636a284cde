import type { Kysely } from 'kysely'
import { migrate } from './migrate.js'
import { openPostgres } from './postgres.js'
import { openSqlite } from './sqlite.js'
import { Store } from './store.js'
import { SYSTEM_ACCOUNTS } from './accounts.js'

/** Opens the store named by a `sqlite:` or `postgres://` URL, migrated and with the system accounts present. */
export async function openStore(url: string, now: () => number = Date.now): Promise<Store> {
  let store: Store
  let schema: string | null = null
  if (url.startsWith('sqlite:')) {
    const h = openSqlite(url)
    store = new Store(h.db, 'sqlite', h.backend)
  } else if (/^postgres(ql)?:\/\//.test(url)) {
    const h = await openPostgres(url)
    store = new Store(h.db, 'postgres', h.backend)
    schema = h.schema
  } else {
    throw new Error(`store must be sqlite:<path> or a postgres:// URL, got ${url}`)
  }
  try {
    await migrate(store.db as unknown as Kysely<unknown>, store.dialect, schema)
    for (const address of Object.values(SYSTEM_ACCOUNTS)) await store.accounts.ensure(address, 'system', now())
  } catch (err) {
    await store.close()
    throw err
  }
  return store
}
