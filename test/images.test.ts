import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { IMAGE_MAX_TOKENS } from '../src/metering/images.js'
import { chat, startMarket, type Market } from './helpers/market.js'

/** The head of a PNG of `width` × `height` (what the gateway reads of it), as a data URL. */
function png(width: number, height: number): string {
  const b = Buffer.alloc(33)
  b.writeUInt32BE(0x89504e47, 0)
  b.writeUInt32BE(0x0d0a1a0a, 4)
  b.writeUInt32BE(13, 8)
  b.write('IHDR', 12, 'latin1')
  b.writeUInt32BE(width, 16)
  b.writeUInt32BE(height, 20)
  return `data:image/png;base64,${b.toString('base64')}`
}

const ask = (image: Record<string, unknown>) => ({
  model: 'svc/atlas@1',
  max_tokens: 16,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'What is in this picture?' },
        { type: 'image_url', image_url: image },
      ],
    },
  ],
})
const textOnly = {
  model: 'svc/atlas@1',
  max_tokens: 16,
  messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }] }],
}

describe('image inputs', () => {
  let m: Market
  let base: number

  beforeAll(async () => {
    m = await startMarket({
      edit: (cfg) => {
        cfg.models.find((x) => x.id === 'svc/atlas@1')!.capabilities.vision = true
      },
    })
    base = (await (await chat(m.url, m.key, textOnly)).json()).usage.prompt_tokens
  })
  afterAll(() => m?.close())

  const promptTokens = async (body: unknown) => {
    const res = await chat(m.url, m.key, body)
    expect(res.status).toBe(200)
    return (await res.json()).usage.prompt_tokens as number
  }

  it('lists which models take images', async () => {
    const models = (await (await fetch(`${m.url}/v1/models`)).json()).data as {
      id: string
      svc: { capabilities: { vision?: boolean } }
    }[]
    expect(models.find((x) => x.id === 'svc/atlas@1')!.svc.capabilities.vision).toBe(true)
    expect(models.find((x) => x.id === 'svc/tern@2')!.svc.capabilities.vision).toBeUndefined()
  })

  it('forwards image_url parts through the openai SDK and meters each by its size', async () => {
    const client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
    const url = png(1024, 1024)
    const res = await client.chat.completions.create(ask({ url }) as never)
    // 1024² keeps its size under 2048, its shorter side scales to 768: 2 × 2 tiles, 85 + 4 × 170.
    expect(res.usage!.prompt_tokens - base).toBe(765)
    expect(m.sims.atlasCheap.requests.at(-1)).toMatchObject({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'image_url', image_url: { url } },
          ],
        },
      ],
    })
    // 4000 × 1000 fits 2048 as 2048 × 512, its shorter side already under 768: 4 × 1 tiles.
    expect((await promptTokens(ask({ url: png(4000, 1000), detail: 'high' }))) - base).toBe(85 + 170 * 4)
    expect((await promptTokens(ask({ url, detail: 'low' }))) - base).toBe(85)
    // An https image is not fetched: it counts at the rule's most.
    expect((await promptTokens(ask({ url: 'https://example.com/cat.png' }))) - base).toBe(IMAGE_MAX_TOKENS)
  })

  it('refuses images for a model that takes none, and images it cannot read, charging nothing', async () => {
    const before = (await m.store.accounts.byId(m.accountId))!.balance
    const refusal = async (body: unknown) => {
      const res = await chat(m.url, m.key, body)
      return { status: res.status, error: (await res.json()).error }
    }
    expect(await refusal({ ...ask({ url: png(10, 10) }), model: 'svc/tern@2' })).toMatchObject({
      status: 400,
      error: { param: 'messages', message: expect.stringMatching(/does not take images/) },
    })
    expect(await refusal(ask({ url: 'http://example.com/x.png' }))).toMatchObject({
      status: 400,
      error: { param: 'messages[0].content[1].image_url' },
    })
    expect(await refusal(ask({ url: 'data:image/png;base64,AAAA' }))).toMatchObject({
      status: 400,
      error: { message: expect.stringMatching(/readable png/) },
    })
    expect(await refusal(ask({ url: png(10, 10), detail: 'ultra' }))).toMatchObject({ status: 400 })
    const many = {
      ...textOnly,
      messages: [
        {
          role: 'user',
          content: Array.from({ length: 17 }, () => ({ type: 'image_url', image_url: { url: png(8, 8) } })),
        },
      ],
    }
    expect(await refusal(many)).toMatchObject({
      status: 400,
      error: { message: expect.stringMatching(/at most 16 images/) },
    })
    expect((await m.store.accounts.byId(m.accountId))!.balance).toBe(before)
  })

  it("takes Anthropic's image blocks, sent on as image_url parts", async () => {
    const client = new Anthropic({ baseURL: m.url, apiKey: m.key, maxRetries: 0 })
    const data = png(512, 512).split(',')[1]!
    const msg = await client.messages.create({
      model: 'svc/atlas@1',
      max_tokens: 16,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
          ],
        },
      ],
    })
    expect(msg.content[0]).toMatchObject({ type: 'text' })
    expect(m.sims.atlasCheap.requests.at(-1)).toMatchObject({
      messages: [
        {
          role: 'user',
          content: [{ type: 'text' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } }],
        },
      ],
    })
  })
})
