import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { openStore } from '../../open.js'
import { freshSqliteUrl } from '../../../../test/helpers/stores.js'

const pageSize = (path: string) => {
  const raw = new BetterSqlite3(path, { readonly: true })
  try {
    return Number(raw.pragma('page_size', { simple: true }))
  } finally {
    raw.close()
  }
}

/** WAL bytes per transaction follow the page size: a new file takes small pages, an existing one keeps its own. */
describe('the page size of a SQLite store', () => {
  it('is small for a new file', async () => {
    const url = freshSqliteUrl()
    const store = await openStore(url)
    await store.close()
    // SQLite's own default is 4096.
    expect(pageSize(url.slice('sqlite:'.length))).toBe(1024)
  })

  it('stays what it was for a file made before (4 KiB), which opens, migrates and takes postings as ever', async () => {
    const url = freshSqliteUrl()
    const path = url.slice('sqlite:'.length)
    const old = new BetterSqlite3(path)
    old.pragma('page_size = 4096')
    old.pragma('journal_mode = WAL')
    old.exec('CREATE TABLE before_us (x integer)')
    old.close()
    const store = await openStore(url)
    const id = (await store.accounts.ensure('0x00000000000000000000000000000000000000c1', 'user', 1000)).account.id
    await store.accounts.deposit({ id, amount: 5n, ref: 'dep_page', now: 1000 })
    expect((await store.accounts.byId(id))!.balance).toBe(5n)
    await store.close()
    expect(pageSize(path)).toBe(4096)
  })
})
