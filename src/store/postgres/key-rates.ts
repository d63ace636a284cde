import type { Kysely } from 'kysely'
import type { Database } from '../schema.js'
import { KeyRatesRepo } from '../key-rates.js'

/** The store's rate counter on Postgres: the shared repository, its conditional upsert numbered as Postgres binds. */
export class PostgresKeyRates extends KeyRatesRepo {
  constructor(db: Kysely<Database>) {
    super(db, true)
  }
}
