import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import { createOpenAI } from '@ai-sdk/openai'
import { embed, embedMany } from 'ai'
import { parseUsdc, priceOf } from '../src/money/usdc.js'
import { tokenCount } from '../src/metering/tokens.js'
import { addEmbeddingModel, P, startMarket, type Market } from './helpers/market.js'
import { receiptOf } from './helpers/receipts.js'

const MODEL = 'svc/loom@1'
/** [input, output] base units per million tokens of the two offers: the cheap one is tried first. */
const CHEAP = 20_000n
const DEAR = 30_000n

const post = (m: Market, key: string | undefined, body: unknown, path = '/v1/embeddings') =>
  fetch(`${m.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  })

describe('POST /v1/embeddings', () => {
  let m: Market
  let client: OpenAI

  beforeAll(async () => {
    m = await startMarket({
      edit: (cfg) =>
        addEmbeddingModel(cfg, MODEL, [
          [P.wren, CHEAP],
          [P.quill, DEAR],
        ]),
    })
    client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
  })
  afterAll(() => m?.close())
  beforeEach(() => {
    m.sims.wren.setFault({ kind: 'none' })
    m.sims.quill.setFault({ kind: 'none' })
  })

  const balance = async () => (await m.store.accounts.byId(m.accountId))!.balance

  it('embeds with the openai SDK, charged its input at the serving offer price, with a usage record', async () => {
    const before = await balance()
    const text = 'The harbor lights at dusk'
    const res = await client.embeddings.create({ model: MODEL, input: text })
    expect(res.object).toBe('list')
    expect(res.data).toHaveLength(1)
    // The SDK asks for base64 and decodes it: 16 float32 numbers of unit length.
    const v = res.data[0]!.embedding
    expect(v).toHaveLength(16)
    expect(Math.abs(Math.hypot(...v) - 1)).toBeLessThan(1e-5)
    const tokens = tokenCount(text)
    expect(res.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens })
    const svc = (res as unknown as { svc: { cost_usdc: string; request_id: string; provider: string } }).svc
    const cost = priceOf({ input: CHEAP, output: 0n }, tokens, 0)
    expect(parseUsdc(svc.cost_usdc)).toBe(cost)
    expect(svc.provider).toBe(P.wren)
    expect(await balance()).toBe(before - cost)
    expect(await m.store.usage.get(m.accountId, svc.request_id)).toMatchObject({
      model: MODEL,
      provider: P.wren,
      promptTokens: tokens,
      completionTokens: 0,
      cost,
      outcome: 'completed',
    })
    const receipt = await receiptOf(m.url, m.key, svc.request_id)
    expect(receipt.receipt).toMatchObject({ model: MODEL, cost: String(cost), completion_tokens: 0 })
    expect((await m.store.ledger.audit()).unbalanced).toEqual([])
  })

  it('takes arrays of strings and token ids, floats or base64, and shorter vectors where the model allows', async () => {
    const floats = await (
      await post(m, m.key, { model: MODEL, input: ['a b', [1, 2, 3]], encoding_format: 'float' })
    ).json()
    expect(floats.data.map((d: { index: number }) => d.index)).toEqual([0, 1])
    expect(floats.usage.prompt_tokens).toBe(tokenCount('a b') + 3)
    expect(floats.data[0].embedding).toHaveLength(16)
    const b64 = await (await post(m, m.key, { model: MODEL, input: 'a b', encoding_format: 'base64' })).json()
    const bytes = Buffer.from(b64.data[0].embedding as string, 'base64')
    const decoded = Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4))
    decoded.forEach((x, i) => expect(x).toBeCloseTo(floats.data[0].embedding[i], 6))
    const short = await client.embeddings.create({ model: MODEL, input: 'a b', dimensions: 8 })
    expect(short.data[0]!.embedding).toHaveLength(8)
  })

  it("works with the AI SDK's embed and embedMany", async () => {
    const provider = createOpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key })
    const model = provider.textEmbeddingModel(MODEL)
    const many = await embedMany({ model, values: ['one', 'two', 'three'], maxRetries: 0 })
    expect(many.embeddings).toHaveLength(3)
    expect(many.embeddings[0]).toHaveLength(16)
    expect(many.embeddings[0]).not.toEqual(many.embeddings[1])
    const one = await embed({ model, value: 'two', maxRetries: 0 })
    expect(one.embedding).toEqual(many.embeddings[1])
  })

  it('fails over within the model before anything is charged, at the price of the offer that served', async () => {
    m.sims.wren.setFault({ kind: 'status-500' })
    const before = await balance()
    const res = await post(m, m.key, { model: MODEL, input: 'fail over' })
    expect(res.status).toBe(200)
    const body = await res.json()
    expect(body.svc.provider).toBe(P.quill)
    const cost = priceOf({ input: DEAR, output: 0n }, tokenCount('fail over'), 0)
    expect(parseUsdc(body.svc.cost_usdc)).toBe(cost)
    expect(await balance()).toBe(before - cost)
    // Both down: 503, nothing charged.
    m.sims.quill.setFault({ kind: 'status-500' })
    const down = await post(m, m.key, { model: MODEL, input: 'nobody' })
    expect(down.status).toBe(503)
    expect((await down.json()).error.code).toBe('no_capacity')
    expect(await balance()).toBe(before - cost)
  })

  it('refuses clearly what it cannot serve, charging nothing', async () => {
    const before = await balance()
    const refusal = async (body: unknown, path?: string) => {
      const res = await post(m, m.key, body, path)
      return { status: res.status, error: (await res.json()).error }
    }
    expect(await refusal({ model: 'svc/atlas@1', input: 'x' })).toMatchObject({
      status: 400,
      error: { code: 'feature_not_supported', param: 'model', message: expect.stringMatching(/chat model/) },
    })
    expect(
      await refusal({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, '/v1/chat/completions'),
    ).toMatchObject({ status: 400, error: { param: 'model', message: expect.stringMatching(/embedding model/) } })
    expect(await refusal({ model: 'svc/nope@1', input: 'x' })).toMatchObject({
      status: 404,
      error: { code: 'model_not_found' },
    })
    expect(await refusal({ model: MODEL, input: [] })).toMatchObject({ status: 400, error: { param: 'input' } })
    expect(await refusal({ model: MODEL, input: ['ok', 7] })).toMatchObject({ status: 400, error: { param: 'input' } })
    expect(await refusal({ model: MODEL, input: 'x', dimensions: 32 })).toMatchObject({
      status: 400,
      error: { param: 'dimensions' },
    })
    expect(await refusal({ model: MODEL, input: 'x', encoding_format: 'int8' })).toMatchObject({
      status: 400,
      error: { param: 'encoding_format' },
    })
    expect(await refusal({ model: MODEL, input: 'word '.repeat(100) })).toMatchObject({
      status: 400,
      error: { param: 'input' },
    })
    const noKey = await post(m, undefined, { model: MODEL, input: 'x' })
    expect(noKey.status).toBe(401)
    expect(await balance()).toBe(before)
  })

  it('refuses with insufficient_quota what the account cannot cover, holding nothing', async () => {
    const account = (await m.store.accounts.byId(m.accountId))!
    await m.store.accounts.approve(m.accountId, 0n)
    try {
      const res = await post(m, m.key, { model: MODEL, input: 'too dear' })
      expect(res.status).toBe(402)
      const err = (await res.json()).error
      expect(err.code).toBe('insufficient_quota')
      expect(err.message).toMatch(/input tokens, at the offer price/)
      expect((await m.store.accounts.byId(m.accountId))!.held).toBe(0n)
    } finally {
      await m.store.accounts.approve(m.accountId, account.cap)
    }
  })
})
