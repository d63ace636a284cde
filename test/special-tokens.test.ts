import { describe, expect, it } from 'vitest'
import { chat, marketPerTest, sseEvents, type Market } from './helpers/market.js'
import { WEATHER } from './helpers/tools.js'
import { countInput, countOutput } from '../src/metering/tokens.js'

// A message or a reply that spells a special token of the tokenizer (`<|endoftext|>`) is text: the encoder refuses
// such text with an error, which failed the request with 503 (its prompt) or left a delivered reply uncharged.
const market = marketPerTest()
const balance = async (mk: Market) => (await mk.store.accounts.byId(mk.accountId))!.balance

describe('text that spells a special token', () => {
  it.each([false, true])('in the prompt is served and charged, counted as text (stream %s)', async (stream) => {
    const mk = await market()
    const before = await balance(mk)
    const content = 'What does <|endoftext|> mean to a tokenizer?'
    const res = await chat(mk.url, mk.key, { model: 'svc/atlas@1', messages: [{ role: 'user', content }], max_tokens: 20, stream })
    expect(res.status).toBe(200)
    const usage = stream
      ? (await sseEvents(res)).slice(0, -1).map((e) => JSON.parse(e)).find((c) => c.usage).usage
      : (await res.json()).usage
    expect(usage.prompt_tokens).toBe(countInput([{ role: 'user', text: content }]))
    expect(await balance(mk)).toBeLessThan(before)
  })

  it('in a reply is charged, counted as text', async () => {
    const mk = await market()
    mk.sims.atlasCheap.settings.toolPreface = 'Sending <|im_start|> as asked.'
    const before = await balance(mk)
    const res = await chat(mk.url, mk.key, { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'Call get_weather' }], tools: [WEATHER], max_tokens: 200 })
    expect(res.status).toBe(200)
    const r = await res.json()
    expect(r.choices[0].message.content).toBe('Sending <|im_start|> as asked.')
    const calls = r.choices[0].message.tool_calls.map((c: { function: { name: string; arguments: string } }) => c.function)
    expect(r.usage.completion_tokens).toBe(countOutput('Sending <|im_start|> as asked.', calls))
    expect(Number(r.svc.cost_usdc)).toBeGreaterThan(0)
    expect(await balance(mk)).toBeLessThan(before)
  })
})
