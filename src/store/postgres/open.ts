import pg from 'pg'
import { Kysely, PostgresDialect, sql } from 'kysely'
import { ConfigError } from '../../config.js'
import type { Database } from '../schema.js'
import type { Lock } from '../dialect.js'

const INT8 = 20
const CONNECT_TIMEOUT_MS = 10_000
/** Postgres's code for a unique violation. */
const UNIQUE_VIOLATION = '23505'

export interface PostgresHandle {
  db: Kysely<Database>
  pool: pg.Pool
  schema: string | null
  /** A Postgres advisory lock, held by a session of its own until released; null when another holds it. */
  tryLock(name: string): Promise<Lock | null>
  /** Nothing beyond the pool, which the Kysely instance ends. */
  close(): Promise<void>
}

/**
 * Opens a `postgres://` URL. A `schema` query parameter selects (and creates) a schema through
 * search_path, which is how tests get a fresh schema per run.
 */
export async function openPostgres(url: string, poolSize = 16): Promise<PostgresHandle> {
  const parsed = new URL(url)
  const schema = parsed.searchParams.get('schema')
  parsed.searchParams.delete('schema')
  if (schema && !/^[a-z_][a-z0-9_]*$/.test(schema))
    throw new ConfigError(
      [`schema: ${schema} is not a schema name (lower-case letters, digits and _, not first a digit)`],
      'store URL',
    )
  const types = {
    getTypeParser: (oid: number, format?: string) =>
      oid === INT8 ? (v: string) => BigInt(v) : pg.types.getTypeParser(oid, format as 'text'),
  }
  const pool = new pg.Pool({
    connectionString: parsed.toString(),
    max: poolSize,
    // A server that does not answer fails the query that waits for a connection, instead of hanging it for ever.
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    types: types as pg.CustomTypesConfig,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  })
  // An idle connection that dies (a database restart, a failover, an idle-connection reaper) is an 'error' event of
  // the pool: unheard, it would end the process. The pool drops it and opens another for the next query.
  pool.on('error', (err) =>
    console.error(`postgres: an idle connection failed (${err.message}); the next query opens another`),
  )
  // One in use that dies is an 'error' event of its client, which Kysely does not listen for: the query waiting on it
  // fails (its caller sees that), the pool drops the client, and the process must not end.
  pool.on('connect', (client) => client.on('error', () => {}))
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  if (schema) await createSchema(db, schema)
  const handle = {
    async tryLock(name: string): Promise<Lock | null> {
      const client = await pool.connect()
      // The lock lives as long as its session: a connection lost while held is logged, and the release finds it gone.
      const lost = (err: Error) =>
        console.error(`postgres: the connection holding lock ${name} failed (${err.message}); the lock went with it`)
      client.on('error', lost)
      try {
        const r = await client.query<{ ok: boolean }>('select pg_try_advisory_lock(hashtext($1)) as ok', [
          lockName(schema, name),
        ])
        if (!r.rows[0]?.ok) {
          client.removeListener('error', lost)
          client.release()
          return null
        }
      } catch (err) {
        client.removeListener('error', lost)
        client.release(true)
        throw err
      }
      return {
        release: async () => {
          let broken: Error | undefined
          try {
            await client.query('select pg_advisory_unlock(hashtext($1))', [lockName(schema, name)])
          } catch (err) {
            // A session that ended has released its locks already.
            broken = err as Error
          } finally {
            client.removeListener('error', lost)
            client.release(broken ?? false)
          }
        },
      }
    },
    close: async () => {},
  }
  return { db, pool, schema, ...handle }
}

/**
 * An advisory lock's key: named within the store's schema when it has one of its own (`?schema=`), so that it never
 * takes another schema's settler or watcher; the name alone without one, as every earlier version took it
 * (docs/architecture.md §15.29).
 */
function lockName(schema: string | null, name: string): string {
  return schema ? `${schema}:${name}` : name
}

/**
 * `create schema if not exists`, safe when several processes open a new schema at once: Postgres may then refuse all
 * but one with a unique violation on its catalog, although the schema exists as asked.
 */
async function createSchema(db: Kysely<Database>, schema: string): Promise<void> {
  try {
    await sql`create schema if not exists ${sql.id(schema)}`.execute(db)
  } catch (err) {
    if ((err as { code?: string }).code !== UNIQUE_VIOLATION) throw err
    const exists = await sql<{
      n: number
    }>`select count(*)::int as n from pg_namespace where nspname = ${schema}`.execute(db)
    if (exists.rows[0]?.n !== 1) throw err
  }
}
