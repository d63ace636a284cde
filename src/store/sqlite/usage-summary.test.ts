import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Database from 'better-sqlite3'
import { CompiledQuery } from 'kysely'
import { DAY_MS, UsageRepo, type UsageFilter } from '../usage.js'
import { boundsQuery, sliceEndQuery, slicedSummary, usageSliceQuery } from './usage-summary.js'
import { postgresDialect } from '../postgres/dialect.js'
import type { Store } from '../store.js'
import { closeFixture, openFixture, usageRecord, type StoreFixture } from '../../../test/helpers/store-fixture.js'
import { turnsDuring } from '../../../test/helpers/turns.js'

const day0 = 20_000 * DAY_MS

describe("an account's usage summary on SQLite, read in slices of time", () => {
  let f: StoreFixture | undefined
  let store: Store
  /** The summary read in two whole statements, as Postgres reads it: the reference. */
  let whole: UsageRepo

  beforeAll(async () => {
    f = await openFixture('sqlite')
    store = f.store
    whole = new UsageRepo(store.db, postgresDialect)
  })
  afterAll(() => closeFixture(f))

  const filters: UsageFilter[] = [
    {},
    { keyId: 'key_a' },
    { model: 'svc/tern@2' },
    { keyId: 'key_b', model: 'svc/atlas@1' },
    { keyId: 'key_none' },
  ]

  async function matches(accountId: number) {
    for (const filter of filters) {
      for (const since of [day0, day0 + 3 * DAY_MS, day0 + 40 * DAY_MS]) {
        const expected = await whole.summary(accountId, filter, since)
        expect(await store.usage.summary(accountId, filter, since), JSON.stringify({ filter, since })).toEqual(expected)
        // In slices of seven rows: days split across slices, and filters that leave some slices empty.
        expect(
          await slicedSummary(store.db, { accountId, filter, since, sliceRows: 7 }),
          JSON.stringify({ filter, since }),
        ).toEqual(expected)
      }
    }
  }

  it('is the summary read whole, over days, keys and models, with refusals', async () => {
    await matches(f!.user)
    // Requests an hour and a half apart over three weeks, on two keys and models, some of them refused.
    for (let i = 0; i < 330; i++) {
      const createdAt = day0 + i * 5_400_000 + (i % 7) * 1000
      const over = {
        keyId: i % 3 ? 'key_a' : 'key_b',
        model: i % 2 ? 'svc/atlas@1' : 'svc/tern@2',
        servedModel: 'svc/atlas@1',
        createdAt,
        promptTokens: i,
        completionTokens: 2 * i,
      }
      const refused = i % 11 === 0
      await store.ledger.record(
        usageRecord(`r${i}`, f!.user, refused ? 0n : BigInt(i), {
          ...over,
          ...(refused ? { outcome: 'no_capacity' } : {}),
        }),
      )
    }
    // More requests in one millisecond than a slice of seven takes: that slice takes them all.
    for (let i = 0; i < 10; i++)
      await store.ledger.record(usageRecord(`same_${i}`, f!.user, 2n, { keyId: 'key_b', createdAt: day0 + 3 * DAY_MS }))
    await store.ledger.record(usageRecord('other_1', f!.other, 5n, { createdAt: day0 + DAY_MS }))
    await matches(f!.user)
    await matches(f!.other)
    const { totals, daily } = await store.usage.summary(f!.user, {}, day0)
    expect(totals.requests).toBe(340)
    expect(daily.length).toBe(21)
  })

  it('reads each slice through the account index by time', async () => {
    const plan = async (c: CompiledQuery) =>
      (
        await store.db.executeQuery<{ detail: string }>(
          CompiledQuery.raw(`EXPLAIN QUERY PLAN ${c.sql}`, [...c.parameters]),
        )
      ).rows
        .map((r) => r.detail)
        .join('\n')
    for (const filter of filters) {
      expect(await plan(usageSliceQuery(store.db, f!.user, filter, { from: 5, to: 9 }).compile())).toMatch(
        /USING INDEX holds_account_time \(account_id=\? AND created_at>\? AND created_at<\?\)/,
      )
    }
    expect(await plan(boundsQuery(f!.user).compile(store.db))).not.toMatch(/SCAN holds\b/)
    expect(await plan(sliceEndQuery(f!.user, 5, 4096).compile(store.db))).toMatch(
      /USING COVERING INDEX holds_account_time \(account_id=\? AND created_at>\?\)/,
    )
  })

  it("refuses days that do not begin at a day's start", async () => {
    await expect(store.usage.summary(f!.user, {}, day0 + 100)).rejects.toThrow(RangeError)
  })

  it('reads an account of many rows a slice at a time, the event loop free between them', async () => {
    // 40,000 requests of the user over 10 days, written straight to the file: ten slices.
    const raw = new Database(f!.url.slice('sqlite:'.length))
    const insert =
      raw.prepare(`INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at,
      closed_at, cost, stream, prompt_tokens, completion_tokens, outcome, latency_ms) VALUES (?, ?, 'key_a', 'svc/atlas@1', 100, 'captured', 'i1', ?, ?, ?, 10, 0, 7, 3, 'completed', 5)`)
    raw.transaction(() => {
      for (let i = 0; i < 40_000; i++)
        insert.run(
          `bulk_${i}`,
          f!.user,
          day0 + 40 * DAY_MS + i * 21_600,
          day0 + 51 * DAY_MS,
          day0 + 40 * DAY_MS + i * 21_600 + 5,
        )
    })()
    raw.close()
    const since = day0 + 40 * DAY_MS
    let read: unknown
    const turns = await turnsDuring(async () => (read = await store.usage.summary(f!.user, {}, since)))
    expect(read).toEqual(await whole.summary(f!.user, {}, since))
    // Slices of 4,096 rows: ten or more, with a turn between each two (the bound written out, not read from the code).
    expect(turns).toBeGreaterThanOrEqual(8)
    expect(await turnsDuring(() => whole.summary(f!.user, {}, since))).toBeLessThanOrEqual(1)
  })
})
