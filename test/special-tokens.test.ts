import { describe, expect, it } from 'vitest'
import { chat, marketPerTest, sseEvents, type Market } from './helpers/market.js'
import { WEATHER } from './helpers/tools.js'
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base'
import { PER_MESSAGE_OVERHEAD, REPLY_PRIMING } from '../src/metering/tokens.js'

/** The encoder's own count of `text`, its special tokens' spellings taken as text. */
const asText = (text: string) => countTokens(text, { disallowedSpecial: new Set() })

// A message or a reply that spells a special token of the tokenizer (`<|endoftext|>`) is text: the encoder refuses
// such text with an error, which failed the request with 503 (its prompt) or left a delivered reply uncharged.
const market = marketPerTest()
const balance = async (mk: Market) => (await mk.store.accounts.byId(mk.accountId))!.balance

describe('text that spells a special token', () => {
  it.each([false, true])('in the prompt is served and charged, counted as text (stream %s)', async (stream) => {
    const mk = await market()
    const before = await balance(mk)
    const content = 'What does <|endoftext|> mean to a tokenizer?'
    const res = await chat(mk.url, mk.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content }],
      max_tokens: 20,
      stream,
    })
    expect(res.status).toBe(200)
    const usage = stream
      ? (await sseEvents(res))
          .slice(0, -1)
          .map((e) => JSON.parse(e))
          .find((c) => c.usage).usage
      : (await res.json()).usage
    expect(usage.prompt_tokens).toBe(REPLY_PRIMING + PER_MESSAGE_OVERHEAD + asText(content))
    expect(await balance(mk)).toBeLessThan(before)
  })

  it('in a reply is charged, counted as text', async () => {
    const mk = await market()
    mk.sims.atlasCheap.settings.toolPreface = 'Sending <|im_start|> as asked.'
    const before = await balance(mk)
    const res = await chat(mk.url, mk.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'Call get_weather' }],
      tools: [WEATHER],
      max_tokens: 200,
    })
    expect(res.status).toBe(200)
    const r = await res.json()
    expect(r.choices[0].message.content).toBe('Sending <|im_start|> as asked.')
    const calls: { function: { name: string; arguments: string } }[] = r.choices[0].message.tool_calls
    expect(r.usage.completion_tokens).toBe(
      asText('Sending <|im_start|> as asked.') +
        calls.reduce((n, c) => n + asText(c.function.name) + asText(c.function.arguments), 0),
    )
    expect(Number(r.svc.cost_usdc)).toBeGreaterThan(0)
    expect(await balance(mk)).toBeLessThan(before)
  })
})
