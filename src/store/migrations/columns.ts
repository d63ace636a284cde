import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/** Column types the migrations name per dialect, written once instead of in every migration. */
export function columnsOf(dialect: Dialect) {
  return {
    /** A 64-bit integer (amounts in base units, epoch milliseconds): SQLite's integer is 64-bit already. */
    big: dialect === 'postgres' ? ('bigint' as const) : ('integer' as const),
    /** Adds an `id` primary key that numbers rows as they are inserted. */
    serial: (t: ReturnType<Kysely<unknown>['schema']['createTable']>) =>
      dialect === 'postgres'
        ? t.addColumn('id', 'bigserial', (c) => c.primaryKey())
        : t.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()),
  }
}
