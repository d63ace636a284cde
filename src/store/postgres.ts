import pg from 'pg'
import { Kysely, PostgresDialect, sql } from 'kysely'
import type { Database } from './schema.js'
import type { Backend, Lock } from './store.js'

const INT8 = 20

export interface PostgresHandle {
  db: Kysely<Database>
  pool: pg.Pool
  backend: Backend
  schema: string | null
}

/**
 * Opens a `postgres://` URL. A `schema` query parameter selects (and creates) a schema through
 * search_path, which is how tests get a fresh schema per run.
 */
export async function openPostgres(url: string, poolSize = 16): Promise<PostgresHandle> {
  const parsed = new URL(url)
  const schema = parsed.searchParams.get('schema')
  parsed.searchParams.delete('schema')
  if (schema && !/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name ${schema}`)
  const types = { getTypeParser: (oid: number, format?: string) => (oid === INT8 ? (v: string) => BigInt(v) : pg.types.getTypeParser(oid, format as 'text')) }
  const pool = new pg.Pool({
    connectionString: parsed.toString(),
    max: poolSize,
    types: types as pg.CustomTypesConfig,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  })
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  if (schema) await sql`create schema if not exists ${sql.id(schema)}`.execute(db)
  const backend: Backend = {
    async tryLock(name: string): Promise<Lock | null> {
      const client = await pool.connect()
      try {
        const r = await client.query<{ ok: boolean }>('select pg_try_advisory_lock(hashtext($1)) as ok', [name])
        if (!r.rows[0]?.ok) {
          client.release()
          return null
        }
      } catch (err) {
        client.release()
        throw err
      }
      return {
        release: async () => {
          try {
            await client.query('select pg_advisory_unlock(hashtext($1))', [name])
          } finally {
            client.release()
          }
        },
      }
    },
    close: async () => {},
  }
  return { db, pool, backend, schema }
}
