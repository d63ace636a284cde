import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Ajv2020 from 'ajv/dist/2020.js'
import { Validator } from '@seriousme/openapi-schema-validator'
import { routesOf } from '../src/api/app.js'
import { startMarket, type Market } from './helpers/market.js'

/** A Fastify path as OpenAPI writes it: `:id` is `{request_id}`; the model wildcard is a model and its endpoints. */
function documented(method: string, url: string): string[] {
  if (url === '/v1/models/*') return ['/v1/models/{model}', '/v1/models/{model}/endpoints']
  return [url.replace(/:id/g, '{request_id}')]
}

describe('GET /v1/openapi.json', () => {
  let m: Market
  let doc: {
    openapi: string
    paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, unknown> }>>
    components: { schemas: Record<string, unknown> }
  }

  beforeAll(async () => {
    m = await startMarket()
    const res = await fetch(`${m.url}/v1/openapi.json`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/application\/json/)
    doc = await res.json()
  })
  afterAll(() => m?.close())

  it("is a valid OpenAPI 3.1 document (by the specification's own JSON Schema)", async () => {
    const validator = new Validator()
    const result = await validator.validate(structuredClone(doc))
    expect(validator.version).toBe('3.1')
    expect(result).toEqual({ valid: true })
    // The check can fail: a path without its responses is not a document.
    const broken = structuredClone(doc) as { paths: Record<string, Record<string, unknown>> }
    broken.paths['/v1/chat/completions']!.post = { summary: 'no responses', responses: 'none' }
    expect((await new Validator().validate(broken)).valid).toBe(false)
  })

  it('is an OpenAPI 3.1 document whose schemas compile, and which takes the bodies the routes take', () => {
    expect(doc.openapi).toBe('3.1.0')
    const ajv = new Ajv2020({ strict: false, allErrors: true })
    for (const [name, schema] of Object.entries(doc.components.schemas)) ajv.addSchema(schema as object, name)
    const valid = (name: string, body: unknown) => ajv.validate(name, body)
    expect(valid('ChatRequest', { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }] })).toBe(true)
    expect(valid('ChatRequest', { model: 'svc/atlas@1', messages: [] })).toBe(false)
    expect(valid('ResponsesRequest', { model: 'svc/atlas@1', input: 'hi' })).toBe(true)
    expect(valid('EmbeddingsRequest', { model: 'svc/loom@1', input: ['a', 'b'], encoding_format: 'base64' })).toBe(true)
    expect(valid('EmbeddingsRequest', { model: 'svc/loom@1', input: 5 })).toBe(false)
    const message = { role: 'user', content: [{ type: 'text', text: 'hi' }] }
    expect(valid('MessagesRequest', { model: 'svc/atlas@1', max_tokens: 8, messages: [message] })).toBe(true)
    expect(valid('MessagesRequest', { model: 'svc/atlas@1', messages: [message] })).toBe(false)
    expect(
      valid('Error', { error: { type: 'invalid_request_error', code: 'no_capacity', message: 'x', param: null } }),
    ).toBe(true)
    expect(valid('Error', { error: { type: 'x', code: 'session_required', message: 'x', param: null } })).toBe(false)
  })

  it('names every route the server answers outside the portal, and no route it does not', () => {
    const served = new Set<string>()
    for (const r of routesOf(m.server.app)) {
      if (r.url.startsWith('/portal') || r.method === 'HEAD' || r.method === 'OPTIONS') continue
      for (const path of documented(r.method, r.url)) {
        served.add(`${r.method} ${path}`)
        expect(doc.paths[path]?.[r.method.toLowerCase()], `${r.method} ${path} is not in the document`).toBeDefined()
      }
    }
    const inDoc = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((op) => `${op.toUpperCase()} ${path}`),
    )
    expect(inDoc.sort()).toEqual([...served].sort())
  })

  it('says which routes need a key and which errors each may answer', async () => {
    expect(doc.paths['/v1/models']!.get!.security).toEqual([])
    expect(doc.paths['/v1/chat/completions']!.post!.security).toEqual([{ bearer: [] }, { x402: [] }])
    expect(Object.keys(doc.paths['/v1/embeddings']!.post!.responses)).toEqual(
      expect.arrayContaining(['200', '400', '401', '402', '404', '503']),
    )
    // The document needs no key, and is what the README links.
    expect((await fetch(`${m.url}/v1/openapi.json`, { headers: { authorization: 'Bearer nope' } })).status).toBe(200)
  })
})
