import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { big, num } from './ints.js'
import { SecretUnreadable } from './secret-box.js'
import { EndpointKeys } from './endpoint-keys.js'

export interface Endpoint {
  id: string
  accountId: number
  baseUrl: string
  bundle: string
  profile: string
  status: 'live' | 'withdrawn'
  createdAt: number
  offers: EndpointOffer[]
}

export interface EndpointOffer {
  model: string
  upstreamModel: string
  inputPrice: bigint
  outputPrice: bigint
  maxConcurrency: number
  status: 'live' | 'paused' | 'withdrawn'
}

/** A live offer of a live endpoint of an active provider account, as the gateways' catalogs load it. */
export interface LiveOffer extends Omit<EndpointOffer, 'status'> {
  endpointId: string
  accountId: number
  address: string
  baseUrl: string
  apiKey: string | null
  bundle: string
  profile: string
}

export type OfferFields = Omit<EndpointOffer, 'status'>

/**
 * Providers' endpoints and offers in the store (migration 019); every change stamps `updated_at`. An endpoint's API
 * key is kept sealed (`keys`), bound to the endpoint's id: the store never holds it in plain text.
 */
export class ProviderRepo {
  /** Seals and opens the endpoints' API keys. */
  readonly keys: EndpointKeys

  constructor(private readonly db: Kysely<Database>) {
    this.keys = new EndpointKeys(db)
  }

  async addEndpoint(e: {
    accountId: number
    baseUrl: string
    apiKey: string | null
    bundle: string
    profile: string
    now: number
  }): Promise<string> {
    const id = `ep_${randomBytes(8).toString('hex')}`
    const apiKey = this.keys.seal(id, e.apiKey)
    const at = BigInt(e.now)
    await this.db
      .insertInto('provider_endpoints')
      .values({
        id,
        account_id: e.accountId,
        base_url: e.baseUrl,
        api_key: apiKey,
        bundle: e.bundle,
        profile: e.profile,
        status: 'live',
        created_at: at,
        updated_at: at,
      })
      .execute()
    return id
  }

  /** The account's endpoints (withdrawn ones too) with their offers; never their API keys. */
  async endpoints(accountId: number): Promise<Endpoint[]> {
    const rows = await this.db
      .selectFrom('provider_endpoints')
      .select(['id', 'account_id', 'base_url', 'bundle', 'profile', 'status', 'created_at'])
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .execute()
    const offers = rows.length
      ? await this.db
          .selectFrom('provider_offers')
          .selectAll()
          .where(
            'endpoint_id',
            'in',
            rows.map((r) => r.id),
          )
          .orderBy('model')
          .execute()
      : []
    return rows.map((r) => ({
      id: r.id,
      accountId: num(r.account_id),
      baseUrl: r.base_url,
      bundle: r.bundle,
      profile: r.profile,
      status: r.status,
      createdAt: num(r.created_at),
      offers: offers
        .filter((o) => o.endpoint_id === r.id)
        .map((o) => ({
          model: o.model,
          upstreamModel: o.upstream_model,
          inputPrice: big(o.input_price),
          outputPrice: big(o.output_price),
          maxConcurrency: num(o.max_concurrency),
          status: o.status,
        })),
    }))
  }

  /** Withdraws one of the account's live endpoints and its offers; false when it has no such endpoint. */
  async withdrawEndpoint(accountId: number, id: string, now: number): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const r = await trx
        .updateTable('provider_endpoints')
        .set({ status: 'withdrawn', updated_at: BigInt(now) })
        .where('id', '=', id)
        .where('account_id', '=', accountId)
        .where('status', '=', 'live')
        .executeTakeFirst()
      if (r.numUpdatedRows === 0n) return false
      await trx
        .updateTable('provider_offers')
        .set({ status: 'withdrawn', updated_at: BigInt(now) })
        .where('endpoint_id', '=', id)
        .execute()
      return true
    })
  }

  /** Sets (creates or reprices) an offer of one of the account's live endpoints, live; false without such endpoint. */
  async setOffer(accountId: number, endpointId: string, o: OfferFields, now: number): Promise<boolean> {
    if (!(await this.liveEndpoint(accountId, endpointId))) return false
    const row = {
      upstream_model: o.upstreamModel,
      input_price: o.inputPrice,
      output_price: o.outputPrice,
      max_concurrency: o.maxConcurrency,
      status: 'live' as const,
      updated_at: BigInt(now),
    }
    await this.db
      .insertInto('provider_offers')
      .values({ endpoint_id: endpointId, model: o.model, ...row })
      .onConflict((oc) => oc.columns(['endpoint_id', 'model']).doUpdateSet(row))
      .execute()
    return true
  }

  /**
   * Pauses, resumes or withdraws an offer of one of the account's live endpoints; false when it has no such offer (or
   * it is withdrawn: a withdrawn offer is set again, not resumed).
   */
  async setOfferStatus(
    accountId: number,
    at: { endpointId: string; model: string },
    status: 'live' | 'paused' | 'withdrawn',
    now: number,
  ): Promise<boolean> {
    if (!(await this.liveEndpoint(accountId, at.endpointId))) return false
    const r = await this.db
      .updateTable('provider_offers')
      .set({ status, updated_at: BigInt(now) })
      .where('endpoint_id', '=', at.endpointId)
      .where('model', '=', at.model)
      .where('status', '!=', 'withdrawn')
      .executeTakeFirst()
    return r.numUpdatedRows > 0n
  }

  /** Where one of the account's live endpoints is reached, with its key (for its probe): undefined without one. */
  async secretOf(accountId: number, id: string): Promise<{ baseUrl: string; apiKey: string | null } | undefined> {
    const r = await this.db
      .selectFrom('provider_endpoints')
      .select(['base_url', 'api_key'])
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('status', '=', 'live')
      .executeTakeFirst()
    return r && { baseUrl: r.base_url, apiKey: this.keys.open(id, r.api_key) }
  }

  private async liveEndpoint(accountId: number, id: string): Promise<boolean> {
    const r = await this.db
      .selectFrom('provider_endpoints')
      .select('id')
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('status', '=', 'live')
      .executeTakeFirst()
    return r !== undefined
  }

  /**
   * Every live offer of a live endpoint whose provider account is active: what gateways route to. An offer whose
   * endpoint's API key does not open is left out, and `unreadable` told why.
   */
  async liveOffers(unreadable: (err: SecretUnreadable) => void = () => {}): Promise<LiveOffer[]> {
    const rows = await this.db
      .selectFrom('provider_offers as o')
      .innerJoin('provider_endpoints as e', 'e.id', 'o.endpoint_id')
      .innerJoin('accounts as a', 'a.id', 'e.account_id')
      .select([
        'o.endpoint_id',
        'o.model',
        'o.upstream_model',
        'o.input_price',
        'o.output_price',
        'o.max_concurrency',
        'e.account_id',
        'e.base_url',
        'e.api_key',
        'e.bundle',
        'e.profile',
        'a.address',
      ])
      .where('o.status', '=', 'live')
      .where('e.status', '=', 'live')
      .where('a.status', '=', 'active')
      .orderBy('o.endpoint_id')
      .orderBy('o.model')
      .execute()
    const keys = new Map<string, string | null>()
    for (const r of rows) {
      if (keys.has(r.endpoint_id)) continue
      try {
        keys.set(r.endpoint_id, this.keys.open(r.endpoint_id, r.api_key))
      } catch (err) {
        if (!(err instanceof SecretUnreadable)) throw err
        unreadable(err)
      }
    }
    return rows.flatMap((r) => {
      const apiKey = keys.get(r.endpoint_id)
      return apiKey === undefined ? [] : [{ ...liveOffer(r), apiKey }]
    })
  }
}

function liveOffer(r: {
  endpoint_id: string
  account_id: number | bigint
  address: string
  base_url: string
  bundle: string
  profile: string
  model: string
  upstream_model: string
  input_price: number | bigint
  output_price: number | bigint
  max_concurrency: number | bigint
}): Omit<LiveOffer, 'apiKey'> {
  return {
    endpointId: r.endpoint_id,
    accountId: num(r.account_id),
    address: r.address,
    baseUrl: r.base_url,
    bundle: r.bundle,
    profile: r.profile,
    model: r.model,
    upstreamModel: r.upstream_model,
    inputPrice: big(r.input_price),
    outputPrice: big(r.output_price),
    maxConcurrency: num(r.max_concurrency),
  }
}
