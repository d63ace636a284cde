import type { Kysely } from 'kysely'
import type { Database } from './schema.js'
import { num } from './ints.js'

export interface Instance {
  id: string
  host: string
  pid: number
  startedAt: number
  heartbeatAt: number
}

/** Live gateway processes, so that the holds of a dead one can be released by the living. */
export class InstanceRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async register(i: Omit<Instance, 'heartbeatAt'>): Promise<void> {
    await this.db
      .insertInto('instances')
      .values({
        id: i.id,
        host: i.host,
        pid: i.pid,
        started_at: BigInt(i.startedAt),
        heartbeat_at: BigInt(i.startedAt),
      })
      .execute()
  }

  /** False when the instance is no longer registered (a peer took it for dead and removed it). */
  async heartbeat(id: string, now: number): Promise<boolean> {
    const r = await this.db
      .updateTable('instances')
      .set({ heartbeat_at: BigInt(now) })
      .where('id', '=', id)
      .executeTakeFirst()
    return r.numUpdatedRows > 0n
  }

  async list(): Promise<Instance[]> {
    const rows = await this.db.selectFrom('instances').selectAll().execute()
    return rows.map((r) => ({
      id: r.id,
      host: r.host,
      pid: num(r.pid),
      startedAt: num(r.started_at),
      heartbeatAt: num(r.heartbeat_at),
    }))
  }

  async remove(ids: string[]): Promise<void> {
    if (ids.length) await this.db.deleteFrom('instances').where('id', 'in', ids).execute()
  }
}

/** A request being served, as an instance's heartbeat writes it. */
export interface InFlight {
  requestId: string
  accountId: number
  keyId: string
  model: string
  stream: boolean
  promptTokens: number
  createdAt: number
}

/** The requests each instance is serving, so that those a dead instance cut off keep a usage record. */
export class InFlightRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Writes what `owner` serves now that was not written, and deletes what it no longer serves. */
  async sync(owner: string, added: InFlight[], ended: string[]): Promise<void> {
    if (ended.length) await this.db.deleteFrom('requests_in_flight').where('request_id', 'in', ended).execute()
    if (added.length === 0) return
    const rows = added.map((r) => ({
      request_id: r.requestId,
      owner,
      account_id: r.accountId,
      key_id: r.keyId,
      model: r.model,
      stream: r.stream ? 1 : 0,
      prompt_tokens: r.promptTokens,
      created_at: BigInt(r.createdAt),
      cut_off_at: null,
    }))
    await this.db
      .insertInto('requests_in_flight')
      .values(rows)
      .onConflict((oc) => oc.column('request_id').doNothing())
      .execute()
  }

  /** Marks the requests of instances no longer registered as cut off; how many. */
  async cutOffUnregistered(now: number): Promise<number> {
    const registered = this.db.selectFrom('instances').select('id')
    const r = await this.db
      .updateTable('requests_in_flight')
      .set({ cut_off_at: BigInt(now) })
      .where('cut_off_at', 'is', null)
      .where('owner', 'not in', registered)
      .executeTakeFirst()
    return Number(r.numUpdatedRows)
  }

  /** A cut-off request of the account, when there is one by that id. */
  async cutOff(accountId: number, requestId: string): Promise<(InFlight & { cutOffAt: number }) | undefined> {
    const r = await this.db
      .selectFrom('requests_in_flight')
      .selectAll()
      .where('request_id', '=', requestId)
      .where('account_id', '=', accountId)
      .where('cut_off_at', 'is not', null)
      .executeTakeFirst()
    if (!r) return undefined
    return {
      requestId: r.request_id,
      accountId: num(r.account_id),
      keyId: r.key_id,
      model: r.model,
      stream: num(r.stream) === 1,
      promptTokens: num(r.prompt_tokens),
      createdAt: num(r.created_at),
      cutOffAt: num(r.cut_off_at),
    }
  }
}
