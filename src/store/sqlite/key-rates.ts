import type BetterSqlite3 from 'better-sqlite3'
import {
  DummyDriver,
  Kysely,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
  type Expression,
} from 'kysely'
import type { Database } from '../schema.js'
import { KeyRatesRepo, takeQuery, takeValues, type TakeTerms, type TakeValues } from '../key-rates.js'
import { num } from '../ints.js'
import { bySame, type Item } from './engine/group-sets.js'
import type { RateAnswer, RateCount, RateTake } from '../../limits/counter.js'

type CountRow = { requests: bigint; tokens: bigint } | undefined

const countOf = (row: CountRow): RateCount => ({ requests: num(row?.requests ?? 0n), tokens: num(row?.tokens ?? 0n) })

/** A hold of the group that carries a rate take. */
type Rated = Item<void> & { hold: { rate: RateTake } }

/** Takes of one key, minute and limits: what one write may count together. */
const keyMinute = ({ hold: { keyId, rate } }: Rated) =>
  `${keyId}\0${rate.minute}\0${rate.limits.rpm}\0${rate.limits.tpm}`

/** Kysely as a compiler of SQLite's statements only: it runs none. */
const compiler = new Kysely<Database>({
  dialect: {
    createAdapter: () => new SqliteAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new SqliteIntrospector(db),
    createQueryCompiler: () => new SqliteQueryCompiler(),
  },
})

const named = <T>(name: keyof TakeValues) => sql.raw(`@${name}`) as unknown as Expression<T>

/** The take's values as the named parameters better-sqlite3 binds from a TakeValues object. */
const NAMED: TakeTerms = {
  keyId: named('keyId'),
  minute: named('minute'),
  requests: named('requests'),
  tokens: named('tokens'),
  rpm: named('rpm'),
  tpm: named('tpm'),
}

/** The conditional upsert of `takeQuery`, compiled once. */
const TAKE_SQL = takeQuery(compiler, NAMED).compile().sql

/**
 * The store's per-key rate counts on SQLite as prepared statements: a take (the conditional upsert) and a peek.
 * Run at once, each is a transaction of its own; run by a hot-ledger group, the takes are part of their holds'.
 */
export function sqliteRateOps(raw: BetterSqlite3.Database) {
  const upsert = raw.prepare(TAKE_SQL)
  const read = raw.prepare('SELECT requests, tokens FROM key_rates WHERE key_id = ? AND minute = ?')
  const peek = (keyId: string, minute: number): RateCount => countOf(read.get(keyId, minute) as CountRow)
  const take = (keyId: string, rate: RateTake): RateAnswer => {
    const row = upsert.get(takeValues(keyId, rate)) as CountRow
    if (row) return { taken: true, count: countOf(row) }
    return { taken: false, count: peek(keyId, rate.minute) }
  }

  /**
   * Counts a set of takes of one key and minute in one write when the limits leave room for all of them (each is
   * answered the counts it would have had counted alone, in order), or else one by one.
   */
  const takeSet = (set: Rated[]): RateAnswer[] => {
    const { keyId, rate } = set[0]!.hold
    if (set.length > 1) {
      const tokens = set.reduce((all, i) => all + i.hold.rate.tokens, 0)
      const row = upsert.get(takeValues(keyId, { ...rate, tokens }, set.length)) as CountRow
      if (row) {
        let { requests, tokens: counted } = countOf(row)
        const answers: RateAnswer[] = new Array<RateAnswer>(set.length)
        for (let i = set.length - 1; i >= 0; i--) {
          answers[i] = { taken: true, count: { requests, tokens: counted } }
          requests -= 1
          counted -= set[i]!.hold.rate.tokens
        }
        return answers
      }
    }
    return set.map((i) => take(keyId, i.hold.rate))
  }

  return {
    take,
    peek,
    /** Counts the group's holds that carry a rate take, a set per key and minute at a time; each one's answer. */
    takeAll(holds: Item<void>[]): Map<number, RateAnswer> {
      const answers = new Map<number, RateAnswer>()
      const rated = holds.filter((i): i is Rated => i.hold.rate !== undefined)
      for (const set of bySame(rated, keyMinute)) takeSet(set).forEach((a, n) => answers.set(set[n]!.at, a))
      return answers
    },
  }
}

/**
 * The store's rate counter on SQLite. A gateway's takes go with their holds (`HoldRequest.rate`), so `take` is the
 * shared repository's; a peek is a prepared statement on the ledger's own connection.
 */
export class SqliteKeyRates extends KeyRatesRepo {
  private readonly ops

  constructor(raw: BetterSqlite3.Database, db: Kysely<Database>) {
    super(db)
    this.ops = sqliteRateOps(raw)
  }

  override async peek(keyId: string, minute: number): Promise<RateCount> {
    return this.ops.peek(keyId, minute)
  }
}
