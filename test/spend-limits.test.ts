import { afterEach, describe, expect, it } from 'vitest'
import { startServer, type RunningServer } from '../src/server.js'
import { openStore } from '../src/store/open.js'
import { issueKey } from '../src/accounts/operations.js'
import { formatUsdc } from '../src/money/usdc.js'
import type { LimitReset } from '../src/limits/period.js'
import { chat, startMarket, type Market } from './helpers/market.js'
import { maxCostFor } from './helpers/money.js'
import { postgresReachable, type StoreKind } from './helpers/stores.js'
import { expectError } from './helpers/errors.js'

const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }
const DAY = 86_400_000

/** A key's spend limit over its periods, through two gateways on one store whose clock the test moves. */
describe.each<StoreKind>(['sqlite', 'postgres'])('a key spend limit that resets, on %s', (kind) => {
  let m: Market | undefined
  let second: RunningServer | undefined
  const closers: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close()
  })

  async function market(now: () => number) {
    m = await startMarket({ store: kind, now })
    const store2 = await openStore(m.config.store)
    second = await startServer({ ...m.config, listen: { host: '127.0.0.1', port: 0 } }, { store: store2, now })
    closers.push(m.close, store2.close.bind(store2), second.close)
    return { m, second }
  }

  async function limitedKey(m: Market, limit: bigint, reset: LimitReset, now: number) {
    const spend = { limit, reset }
    return issueKey({
      now,
      store: m.store,
      accountId: m.accountId,
      name: 'bot',
      limits: { rpm: null, tpm: null, spend },
    })
  }

  it('refuses with 402 naming the limit and its reset once spent, charges nothing, and admits again the next day', async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    let clock = Date.UTC(2026, 10, 29, 23, 0, 0)
    const { m, second } = await market(() => clock)
    const max = maxCostFor(m.config, body)
    // Room for one request's hold: once it is charged (less than its hold, more than 0), the next does not fit.
    const { key, id } = await limitedKey(m, max, 'daily', clock)
    const first = await chat(m.url, key, body)
    expect(first.status).toBe(200)
    const cost = BigInt(Math.round(Number((await first.json()).svc.cost_usdc) * 1e6))
    const refused = await chat(second.url, key, body)
    const e = await expectError(refused, 402, 'insufficient_quota', null)
    expect(e.message).toContain(`spend limit of ${formatUsdc(max)} USDC a day`)
    expect(e.message).toContain(`${formatUsdc(cost)} USDC spent`)
    expect(e.message).toContain('resets at 2026-11-30T00:00:00.000Z')
    expect(e.message).toMatch(/Nothing was charged/)
    // The refusal moved no money: one charge on the account, the key's period spent is that charge.
    const usage = await m.store.usage.list(m.accountId, { limit: 10 })
    expect(usage.filter((u) => u.cost > 0n)).toHaveLength(1)
    const auth = { authorization: `Bearer ${key}` }
    const shown = await (await fetch(`${second.url}/v1/usage/keys`, { headers: auth })).json()
    expect(shown.data.find((k: { key_id: string }) => k.key_id === id)).toMatchObject({
      spend_limit: formatUsdc(max),
      limit_reset: 'daily',
      this_period: {
        spent_usdc: formatUsdc(cost),
        held_usdc: '0.000000',
        remaining_usdc: formatUsdc(max - cost),
        resets_at: Date.UTC(2026, 10, 30) / 1000,
      },
    })
    // The next UTC day, the key may spend its limit again, through either gateway.
    clock += DAY
    const again = await chat(second.url, key, body)
    expect(again.status).toBe(200)
    await again.json()
    const [k] = (await m.store.keys.list(m.accountId)).filter((k) => k.id === id)
    expect(k!.period.start).toBe(Date.UTC(2026, 10, 30))
    expect(k!.period.held).toBe(0n)
  })

  it('counts only what admitted requests hold: a key without room refuses before the account would', async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    const { m } = await market(Date.now)
    const max = maxCostFor(m.config, body)
    const { key } = await limitedKey(m, max - 1n, 'monthly', Date.now())
    const before = (await m.store.accounts.byId(m.accountId))!
    const e = await expectError(await chat(m.url, key, body), 402, 'insufficient_quota', null)
    expect(e.message).toContain(`USDC a month`)
    const after = (await m.store.accounts.byId(m.accountId))!
    expect(after).toMatchObject({ balance: before.balance, held: 0n })
    const [k] = (await m.store.keys.list(m.accountId)).filter((k) => k.limits.spend)
    expect(k!.period).toMatchObject({ spent: 0n, held: 0n })
    // The account's other keys are not limited by it.
    expect((await chat(m.url, m.key, body)).status).toBe(200)
  })
})
