import type { Kysely } from 'kysely'
import type { Database } from '../schema.js'
import { KeyRatesRepo } from '../key-rates.js'

/** The store's rate counter on Postgres: the shared repository, each take built by Kysely with its values bound. */
export class PostgresKeyRates extends KeyRatesRepo {
  constructor(db: Kysely<Database>) {
    super(db)
  }
}
