import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { isSealed, SecretUnreadable, type SecretBox } from './secret-box.js'

/** An endpoint's API key was given, but the marketplace has no secrets key to seal it with. */
export class NoSecretsKey extends Error {
  constructor() {
    super(
      'this marketplace keeps no provider API keys: its operator has set no secrets key (secrets.keyFile or ' +
        'SVC_SECRETS_KEY); register the endpoint without one, or ask the operator',
    )
  }
}

/** The API keys of providers' endpoints, sealed in the store with the marketplace's secrets key. */
export class EndpointKeys {
  private secrets: SecretBox | undefined

  constructor(private readonly db: Kysely<Database>) {}

  /** The box endpoints' API keys are sealed with and opened by; without one, none can be stored. */
  use(box: SecretBox | undefined): void {
    this.secrets = box
  }

  /** What to store of endpoint `id`'s API key: sealed (none stays none). */
  seal(id: string, apiKey: string | null): string | null {
    if (apiKey === null) return null
    if (!this.secrets) throw new NoSecretsKey()
    return this.secrets.seal(apiKey, id)
  }

  /** The API key of endpoint `id` as stored: opened (a key stored before sealing, as it is). */
  open(id: string, stored: string | null): string | null {
    if (stored === null) return null
    if (!isSealed(stored)) return stored
    if (!this.secrets) throw new SecretUnreadable(`the API key of endpoint ${id} is sealed, and no secrets key is set`)
    try {
      return this.secrets.open(stored, id)
    } catch (err) {
      throw new SecretUnreadable(`the API key of endpoint ${id} is ${(err as Error).message}`)
    }
  }

  /**
   * Seals again with the current key every endpoint API key that is not sealed with it (stored in plain text before
   * keys were sealed, or with a key since rotated): how many, and why each that does not open (a key no longer held)
   * was left as it is. Each row is rewritten only if it still holds what was read.
   */
  async reseal(): Promise<{ sealed: number; unreadable: string[] }> {
    const box = this.secrets
    if (!box) throw new NoSecretsKey()
    const rows = await this.db
      .selectFrom('provider_endpoints')
      .select(['id', 'api_key'])
      .where('api_key', 'is not', null)
      .execute()
    let n = 0
    const unreadable: string[] = []
    for (const r of rows) {
      if (r.api_key === null || box.sealedNow(r.api_key)) continue
      let plain: string
      try {
        plain = this.open(r.id, r.api_key)!
      } catch (err) {
        if (!(err instanceof SecretUnreadable)) throw err
        unreadable.push(err.message)
        continue
      }
      const sealed = box.seal(plain, r.id)
      const done = await this.db
        .updateTable('provider_endpoints')
        .set({ api_key: sealed })
        .where('id', '=', r.id)
        .where('api_key', '=', r.api_key)
        .executeTakeFirst()
      n += Number(done.numUpdatedRows)
    }
    return { sealed: n, unreadable }
  }

  /** How many endpoint API keys the store holds in plain text (stored before keys were sealed). */
  async unsealed(): Promise<number> {
    const rows = await this.db
      .selectFrom('provider_endpoints')
      .select('api_key')
      .where('api_key', 'is not', null)
      .execute()
    return rows.filter((r) => r.api_key !== null && !isSealed(r.api_key)).length
  }
}
