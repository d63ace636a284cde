import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import { FULL_CONTRACT, LIMITED_CONTRACT, startMarket, type Market } from './helpers/market.js'

let m: Market
beforeAll(async () => {
  m = await startMarket({
    edit: (c) => {
      // A model no provider serves: listed without pricing.
      c.models.push({
        id: 'svc/orphan@1',
        owned_by: 'nobody',
        contextLimit: 4096,
        capabilities: {
          workload: 'chat',
          tools: false,
          structuredOutputs: false,
          reasoning: false,
          streaming: true,
          maxOutputTokens: 512,
        },
      })
    },
  })
})
afterAll(() => m?.close())

describe('GET /v1/models', () => {
  it('lists every model with the full svc object, without a key', async () => {
    const res = await fetch(`${m.url}/v1/models`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/application\/json/)
    const list = await res.json()
    expect(list.object).toBe('list')
    expect(list.data.map((x: { id: string }) => x.id)).toEqual([
      'svc/atlas@1',
      'svc/tern@2',
      'svc/wren@1',
      'svc/quill@1',
      'svc/orphan@1',
      'svc/cortex@1',
    ])
    const atlas = list.data[0]
    expect(atlas).toMatchObject({ object: 'model', owned_by: 'atlas-labs' })
    expect(typeof atlas.created).toBe('number')
    expect(atlas.svc).toEqual({
      contextLimit: 32768,
      capabilities: {
        workload: 'chat',
        tools: true,
        structuredOutputs: true,
        reasoning: false,
        streaming: true,
        maxOutputTokens: 4096,
      },
      tool_contract: FULL_CONTRACT,
      // The lowest of the two live offers, as strings of base units.
      pricing: { input_price_per_mtok: '150000', output_price_per_mtok: '600000' },
    })
    const wren = list.data[2]
    expect(wren.svc.tool_contract).toBeUndefined()
    expect(wren.svc.pricing).toEqual({ input_price_per_mtok: '50000', output_price_per_mtok: '100000' })
    expect(list.data[4].svc.pricing).toBeUndefined()
  })

  it('lists svc/cortex@1 with candidates, the most conservative capabilities and ceiling pricing', async () => {
    const list = await (await fetch(`${m.url}/v1/models`)).json()
    const cortex = list.data.at(-1)
    expect(cortex.id).toBe('svc/cortex@1')
    expect(cortex.svc.cortex).toBe(true)
    expect(cortex.svc.candidates).toEqual(['svc/atlas@1', 'svc/tern@2', 'svc/wren@1'])
    expect(cortex.svc.contextLimit).toBe(512)
    expect(cortex.svc.capabilities).toEqual({
      workload: 'chat',
      tools: false,
      structuredOutputs: false,
      reasoning: false,
      streaming: true,
      maxOutputTokens: 256,
    })
    expect(cortex.svc.tool_contract).toBeUndefined()
    // Highest live input and output prices among the candidates' offers and the vendor.
    expect(cortex.svc.pricing).toEqual({
      input_price_per_mtok: '3000000',
      output_price_per_mtok: '15000000',
      basis: 'ceiling',
    })
  })

  it('keeps the vendor in the cortex ceiling while its breaker is open, as admission does', async () => {
    const mk = await startMarket()
    try {
      const health = mk.server.gateway.health
      const vendor = mk.server.gateway.catalog.managed!.key
      for (let i = 0; i < 5 && health.breaker(vendor) !== 'open'; i++) {
        expect(health.acquire(vendor, 64)).toBe(true)
        health.release(vendor, 'failure')
      }
      expect(health.breaker(vendor)).toBe('open')
      const cortex = (await (await fetch(`${mk.url}/v1/models`)).json()).data.at(-1)
      expect(cortex.svc.pricing).toEqual({
        input_price_per_mtok: '3000000',
        output_price_per_mtok: '15000000',
        basis: 'ceiling',
      })
    } finally {
      await mk.close()
    }
  })

  it('is readable by the OpenAI SDK', async () => {
    const client = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: 'unused' })
    const ids: string[] = []
    for await (const model of client.models.list()) ids.push(model.id)
    expect(ids).toContain('svc/cortex@1')
    // One model, as models.retrieve asks for it (the id's slash encoded), and as a hand-written URL would.
    const list = await (await fetch(`${m.url}/v1/models`)).json()
    expect(await client.models.retrieve('svc/atlas@1')).toMatchObject(list.data[0])
    expect(await (await fetch(`${m.url}/v1/models/svc/cortex@1`)).json()).toEqual(list.data.at(-1))
    for (const path of ['svc%2Fnope@1', 'svc%252Fatlas@1']) {
      const missing = await fetch(`${m.url}/v1/models/${path}`)
      expect(missing.status, path).toBe(404)
      expect((await missing.json()).error).toMatchObject({ code: 'model_not_found', param: 'model' })
    }
    const none = await fetch(`${m.url}/v1/models/`)
    expect(none.status).toBe(404)
    expect((await none.json()).error).toMatchObject({
      code: 'feature_not_supported',
      message: expect.stringContaining('GET /v1/models lists'),
    })
  })

  it('may be called from any web page: preflights answered, x-request-id readable', async () => {
    const preflight = await fetch(`${m.url}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: {
        origin: 'http://localhost:3000',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type,x-stainless-os',
      },
    })
    expect(preflight.status).toBe(204)
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*')
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST')
    expect(preflight.headers.get('access-control-allow-headers')).toBe('authorization,content-type,x-stainless-os')
    const list = await fetch(`${m.url}/v1/models`, { headers: { origin: 'http://localhost:3000' } })
    expect(list.headers.get('access-control-allow-origin')).toBe('*')
    expect(list.headers.get('access-control-expose-headers')).toContain('x-request-id')
    // The CORS headers depend on the Origin (and a preflight's answer on the headers it asked for): caches are told.
    expect(preflight.headers.get('vary')).toBe('origin, access-control-request-headers')
    expect(list.headers.get('vary')).toBe('origin')
    expect((await fetch(`${m.url}/v1/models`)).headers.get('vary')).toBe('origin')
    expect(
      (await fetch(`${m.url}/v1/models`, { method: 'HEAD', headers: { origin: 'http://localhost:3000' } })).headers.get(
        'vary',
      ),
    ).toBe('origin')
    // A preflight is still an HTTP/1.1 request: without Host it gets the one error shape, not a 204.
    const socket = connect(Number(new URL(m.url).port), '127.0.0.1')
    let answer = ''
    socket.setEncoding('utf8').on('data', (d: string) => (answer += d))
    socket.write('OPTIONS /v1/models HTTP/1.1\r\nOrigin: http://localhost:3000\r\n\r\n')
    await expect.poll(() => answer).toMatch(/^HTTP\/1.1 400 [^]*"code":"feature_not_supported"/)
    socket.destroy()
    // The portal stays same-origin.
    expect(
      (await fetch(`${m.url}/portal/api/config`, { headers: { origin: 'http://localhost:3000' } })).headers.get(
        'access-control-allow-origin',
      ),
    ).toBeNull()
  })
})

describe('cortex tool contract', () => {
  it('intersects the candidates’ contracts when all have tools', async () => {
    const mk = await startMarket({ edit: (c) => void (c.cortex = { candidates: ['svc/atlas@1', 'svc/tern@2'] }) })
    try {
      const cortex = (await (await fetch(`${mk.url}/v1/models`)).json()).data.at(-1)
      expect(cortex.svc.tool_contract).toMatchObject({
        tool_choice: ['auto', 'none'],
        parallel_tool_calls: false,
        strict_schemas: false,
        max_argument_bytes: LIMITED_CONTRACT.max_argument_bytes,
        certified_concurrency: LIMITED_CONTRACT.certified_concurrency,
        agentic_certified: false,
        metering_version: 1,
      })
      expect(cortex.svc.contextLimit).toBe(16384)
    } finally {
      await mk.close()
    }
  })
})
