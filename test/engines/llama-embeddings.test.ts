import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addEmbeddingModel, P, startMarket, type Market } from '../helpers/market.js'
import { modelFile } from '../helpers/engine.js'
import { LLAMA_SERVER, startLlamaServer, type LlamaServer } from '../helpers/llama-server.js'

// llama.cpp's llama-server serving embeddings (`--embedding`) behind the gateway, its model's 64-number vectors.

describe.skipIf(!LLAMA_SERVER)("embeddings from llama.cpp's llama-server", () => {
  let server: LlamaServer
  let m: Market
  let client: OpenAI
  beforeAll(async () => {
    const model = modelFile()
    server = await startLlamaServer(model, ['--embedding', '--pooling', 'mean'])
    m = await startMarket({
      tuning: { firstByteTimeoutMs: 10_000, replyTimeoutMs: 10_000 },
      edit: (cfg) => {
        addEmbeddingModel(cfg, 'svc/loom@1', [[P.wren, 20_000n]], { dimensions: 64, shortenable: false })
        const loom = cfg.models.find((x) => x.id === 'svc/loom@1')!
        loom.tokenizer = model
        const wren = cfg.providers.find((p) => p.address === P.wren)!
        wren.baseUrl = server.url
      },
    })
    client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: m.key, maxRetries: 0 })
  }, 60_000)
  afterAll(async () => {
    await m?.close()
    await server?.stop()
  })

  it('embeds through the gateway, counted in the model’s own tokens as the engine counts them', async () => {
    const res = await client.embeddings.create({ model: 'svc/loom@1', input: ['alpha bravo charlie', 'river stone'] })
    expect(res.data).toHaveLength(2)
    for (const d of res.data) {
      expect(d.embedding).toHaveLength(64)
      expect(d.embedding.every(Number.isFinite)).toBe(true)
    }
    expect(res.data[0]!.embedding).not.toEqual(res.data[1]!.embedding)
    const again = await client.embeddings.create({ model: 'svc/loom@1', input: 'river stone' })
    again.data[0]!.embedding.forEach((x, i) => expect(x).toBeCloseTo(res.data[1]!.embedding[i]!, 5))
    const svc = (res as unknown as { svc: { request_id: string; provider: string } }).svc
    expect(svc.provider).toBe(P.wren)
    const record = await m.store.usage.get(m.accountId, svc.request_id)
    expect(record!.promptTokens).toBe(res.usage.prompt_tokens)
    // The engine's own count of the same inputs, beside the gateway's: the same.
    expect(record!.upstreamPromptTokens).toBe(record!.promptTokens)
  })

  it('refuses a shorter vector than this model makes, before asking the engine', async () => {
    await expect(client.embeddings.create({ model: 'svc/loom@1', input: 'x', dimensions: 8 })).rejects.toMatchObject({
      status: 400,
    })
  })
})
