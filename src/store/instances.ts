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
