import { Store } from './store.js'
import { SYSTEM_ACCOUNTS } from './accounts.js'
import type { StoreBackend, StoreOptions } from './backend.js'
import { openSqliteBackend } from './sqlite/backend.js'
import { openPostgresBackend } from './postgres/backend.js'

export type { StoreOptions } from './backend.js'

/** The dialects a store URL may name, each its folder's backend. */
const BACKENDS: { matches: RegExp; open: (url: string, opts: StoreOptions) => Promise<StoreBackend> }[] = [
  { matches: /^sqlite:/, open: openSqliteBackend },
  { matches: /^postgres(ql)?:\/\//, open: openPostgresBackend },
]

/** Opens the store named by a `sqlite:` or `postgres://` URL, migrated and with the system accounts present. */
export async function openStore(url: string, now: () => number = Date.now, opts: StoreOptions = {}): Promise<Store> {
  const dialect = BACKENDS.find((b) => b.matches.test(url))
  if (!dialect) throw new Error(`store must be sqlite:<path> or a postgres:// URL, got ${url}`)
  const store = new Store(await dialect.open(url, opts))
  try {
    for (const address of Object.values(SYSTEM_ACCOUNTS)) await store.accounts.ensure(address, 'system', now())
  } catch (err) {
    await store.close()
    throw err
  }
  return store
}
