import { afterAll, beforeAll, expect, it } from 'vitest'
import { chat, startMarket, type Market } from './helpers/market.js'
import { keptLogs } from './helpers/ops.js'
const logs = keptLogs()
let m: Market
beforeAll(async () => {
  m = await startMarket({ logger: logs.logger })
})
afterAll(() => m?.close())
it('probe', async () => {
  const body = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }
  const rs = [
    await chat(m.url, undefined, body),
    await chat(m.url, 'svc_test_nope', body),
    await fetch(m.url + '/v1/nothing'),
    await fetch(m.url + '/portal/api/nothing'),
  ]
  for (const r of rs) await r.text()
  await new Promise((r) => setTimeout(r, 200))
  for (const r of rs)
    console.log(
      r.status,
      r.headers.get('x-request-id'),
      JSON.stringify(logs.lines.filter((l) => l.req_id === r.headers.get('x-request-id'))),
    )
})
