import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

let reachable: Promise<boolean> | undefined

/** Whether this machine's Postgres answers; store tests for Postgres are skipped (not failed) when it does not. */
export function postgresReachable(): Promise<boolean> {
  reachable ??= (async () => {
    const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 10_000 })
    try {
      await client.connect()
      await client.query('select 1')
      return true
    } catch {
      return false
    } finally {
      await client.end().catch(() => {})
    }
  })()
  return reachable
}

/** A Postgres URL naming a fresh schema for this run; random, so no two test files (or workers) can share one. */
export function freshPostgresUrl(): string {
  const url = new URL(DATABASE_URL)
  url.searchParams.set('schema', `t_${randomBytes(8).toString('hex')}`)
  return url.toString()
}

export function freshSqliteUrl(): string {
  return `sqlite:${join(mkdtempSync(join(tmpdir(), 'svc-test-')), 'svc.db')}`
}

export type StoreKind = 'sqlite' | 'postgres'
export const STORE_KINDS: StoreKind[] = ['sqlite', 'postgres']

export function freshStoreUrl(kind: StoreKind): string {
  return kind === 'sqlite' ? freshSqliteUrl() : freshPostgresUrl()
}

/** Drops the schemas this process created (best effort). */
export async function dropSchema(url: string): Promise<void> {
  const schema = new URL(url).searchParams.get('schema')
  if (!schema) return
  const client = new pg.Client({ connectionString: DATABASE_URL })
  try {
    await client.connect()
    await client.query(`drop schema if exists "${schema}" cascade`)
  } finally {
    await client.end().catch(() => {})
  }
}
