import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, P, startMarket, type Market } from './helpers/market.js'

interface Checks {
  usage_checked: number
  usage_over_reported: number
  usage_drift: number | null
  finish_checked: number
  finish_contradicted: number
  output_refused: number
}

/**
 * Checks of real traffic at no extra request: each delivered reply's reported usage against the gateway's own count
 * (for a model metered in its own tokenizer), and its finish reason against its length, shown per offer.
 */
describe('offer checks on real traffic', () => {
  let m: Market
  beforeAll(async () => {
    m = await startMarket({
      // atlas names its tokenizer (the simulated model's words are one o200k token each); wren names none.
      edit: (c) => void (c.models.find((x) => x.id === 'svc/atlas@1')!.tokenizer = 'o200k'),
    })
  })
  afterAll(() => m?.close())

  const checks = async (model: string, provider: string): Promise<Checks> => {
    const res = await fetch(`${m.url}/v1/models/${model}/endpoints`)
    const list = (await res.json()) as { data: { provider: string; checks: Checks }[] }
    return list.data.find((e) => e.provider === provider)!.checks
  }
  let sent = 0
  const send = async (model: string, provider: string, maxTokens = 8) => {
    const res = await chat(m.url, m.key, {
      model,
      messages: [{ role: 'user', content: `hi ${sent++}` }],
      max_tokens: maxTokens,
      provider: { only: [provider] },
    })
    expect(res.status).toBe(200)
    return (await res.json()) as { usage: { completion_tokens: number } }
  }

  it('counts replies whose provider reports more output than the gateway counted, and the drift', async () => {
    expect(await checks('svc/atlas@1', P.atlasCheap)).toEqual({
      usage_checked: 0,
      usage_over_reported: 0,
      usage_drift: null,
      finish_checked: 0,
      finish_contradicted: 0,
      output_refused: 0,
    })
    // The simulated model reports 12 output tokens a reply (its words); the gateway counts them in o200k.
    let counted = 0
    for (let i = 0; i < 4; i++) counted += (await send('svc/atlas@1', P.atlasCheap, 20)).usage.completion_tokens
    const drift = (reported: number) => Number(((reported - counted) / counted).toFixed(4))
    expect(await checks('svc/atlas@1', P.atlasCheap)).toEqual({
      usage_checked: 4,
      usage_over_reported: 0,
      usage_drift: drift(48),
      finish_checked: 4,
      finish_contradicted: 0,
      output_refused: 0,
    })
    m.sims.atlasCheap.setFault({ kind: 'inflate', percent: 50 })
    try {
      // The client is charged the gateway's count, whatever the provider claims (18 a reply).
      for (let i = 0; i < 4; i++) counted += (await send('svc/atlas@1', P.atlasCheap, 20)).usage.completion_tokens
    } finally {
      m.sims.atlasCheap.setFault({ kind: 'none' })
    }
    expect(await checks('svc/atlas@1', P.atlasCheap)).toEqual({
      usage_checked: 8,
      usage_over_reported: 4,
      usage_drift: drift(48 + 4 * 18),
      finish_checked: 8,
      finish_contradicted: 0,
      output_refused: 0,
    })
    expect((await checks('svc/atlas@1', P.atlasDear)).usage_checked).toBe(0)
  })

  it('leaves usage unchecked for a model metered in a stand-in tokenizer, and checks finish reasons', async () => {
    await send('svc/wren@1', P.wren)
    m.sims.wren.settings = { ...m.sims.wren.settings, ignoreMaxTokens: true }
    try {
      // It writes 12 words under a bound of 4 and calls the reply complete: `stop` past max_tokens.
      expect((await send('svc/wren@1', P.wren, 4)).usage.completion_tokens).toBe(4)
    } finally {
      m.sims.wren.settings = { ...m.sims.wren.settings, ignoreMaxTokens: false }
    }
    expect(await checks('svc/wren@1', P.wren)).toEqual({
      usage_checked: 0,
      usage_over_reported: 0,
      usage_drift: null,
      finish_checked: 2,
      finish_contradicted: 1,
      output_refused: 0,
    })
  })

  it('counts replies refused for tool calls against their contract, for the offer that sent them', async () => {
    const tools = [
      {
        type: 'function',
        function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
      },
    ]
    m.sims.atlasDear.setFault({ kind: 'bad-tool-args' })
    try {
      const res = await chat(m.url, m.key, {
        model: 'svc/atlas@1',
        messages: [{ role: 'user', content: 'weather in Paris?' }],
        tools,
        tool_choice: 'required',
        provider: { only: [P.atlasDear] },
      })
      expect(res.status).toBe(502)
      expect((await res.json()).error.code).toBe('provider_output_invalid')
    } finally {
      m.sims.atlasDear.setFault({ kind: 'none' })
    }
    expect((await checks('svc/atlas@1', P.atlasDear)).output_refused).toBe(1)
    expect((await checks('svc/atlas@1', P.atlasCheap)).output_refused).toBe(0)
  })
})
