import type { Kysely } from 'kysely'
import type { Database } from './schema.js'

/** How long a response's conversation and output items are kept for `previous_response_id` and `item_reference`. */
export const RESPONSE_RETENTION_MS = 24 * 60 * 60 * 1000

/** Ids read in one statement. */
const READ_SLICE = 500

/** One kept entry: a response's conversation under its id, or an output item under its id; `body` is its JSON. */
export interface KeptEntry {
  id: string
  body: string
}

/** The Responses API's kept responses and items, per API key; each is readable for RESPONSE_RETENTION_MS. */
export class KeptResponseRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Keeps a response's entries in one statement. */
  async keep(keyId: string, entries: KeptEntry[], now: number): Promise<void> {
    if (entries.length === 0) return
    const created = BigInt(now)
    await this.db
      .insertInto('kept_responses')
      .values(entries.map((e) => ({ key_id: keyId, item_id: e.id, body: e.body, created_at: created })))
      .onConflict((oc) => oc.columns(['key_id', 'item_id']).doNothing())
      .execute()
  }

  /** The bodies of the key's entries among `ids` still within their retention, by id. */
  async read(keyId: string, ids: string[], now: number): Promise<Map<string, string>> {
    const found = new Map<string, string>()
    // An id holding a NUL names nothing kept (the ids kept are the gateway's own), and Postgres cannot compare one.
    ids = ids.filter((id) => !id.includes('\0'))
    // In slices: a long conversation's references stay within what one statement may bind.
    for (let i = 0; i < ids.length; i += READ_SLICE) {
      const rows = await this.db
        .selectFrom('kept_responses')
        .select(['item_id', 'body'])
        .where('key_id', '=', keyId)
        .where('item_id', 'in', ids.slice(i, i + READ_SLICE))
        .where('created_at', '>=', BigInt(now - RESPONSE_RETENTION_MS))
        .execute()
      for (const r of rows) found.set(r.item_id, r.body)
    }
    return found
  }

  /** Deletes the entries past their retention; how many. */
  async prune(now: number): Promise<number> {
    const r = await this.db
      .deleteFrom('kept_responses')
      .where('created_at', '<', BigInt(now - RESPONSE_RETENTION_MS))
      .executeTakeFirst()
    return Number(r.numDeletedRows)
  }
}
