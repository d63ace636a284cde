import { ChatRequest } from '../protocol/chat.js'
import { ResponsesRequest } from '../protocol/responses.js'
import { EmbeddingsBody } from '../protocol/embeddings.js'
import { MessagesBody } from '../protocol/anthropic.js'
import { Capabilities, ToolContract } from '../protocol/models.js'
import { ERROR_TABLE, type ErrorCode } from '../protocol/errors.js'

/**
 * The API as an OpenAPI 3.1 document (`GET /v1/openapi.json`), built from the TypeBox schemas the routes validate
 * their bodies with (a TypeBox schema is a JSON Schema, as OpenAPI 3.1's are). Every route the server answers outside
 * the portal is in it; test/openapi.test.ts fails when a route and the document disagree.
 */
export function openApiDocument(version: string): Record<string, unknown> {
  const json = (schema: unknown) => ({ 'application/json': { schema } })
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
  const errors = (...statuses: number[]) =>
    Object.fromEntries(
      statuses.map((s) => [
        String(s),
        {
          description: `${codesOf(s).join(', ')}: nothing was charged`,
          content: json(ref('Error')),
        },
      ]),
    )
  const keyed = [{ bearer: [] }]
  const paid = [{ bearer: [] }, { x402: [] }]
  const x402Refusal = {
    description:
      'insufficient_quota: the account cannot cover the maximum cost, or (no key, x402 on) the request must be paid; the PAYMENT-REQUIRED header then holds the x402 requirements',
    headers: { 'PAYMENT-REQUIRED': { schema: { type: 'string' }, description: 'base64 of the x402 PaymentRequired' } },
    content: json(ref('Error')),
  }
  const served = (description: string, schema: unknown, stream = false) => ({
    description,
    headers: {
      'x-request-id': { schema: { type: 'string' } },
      'PAYMENT-RESPONSE': { schema: { type: 'string' }, description: 'x402 settlement, on a paid keyless request' },
    },
    content: { ...json(schema), ...(stream ? { 'text/event-stream': { schema: { type: 'string' } } } : {}) },
  })
  const post = (summary: string, body: string, reply: unknown, stream: boolean) => ({
    post: {
      summary,
      security: paid,
      parameters: [{ in: 'header', name: 'Idempotency-Key', required: false, schema: { type: 'string' } }],
      requestBody: { required: true, content: json(ref(body)) },
      responses: {
        '200': served(stream ? 'the reply, or with stream: true its server-sent events' : 'the reply', reply, stream),
        '402': x402Refusal,
        ...errors(400, 401, 403, 404, 409, 413, 429, 502, 503),
      },
    },
  })
  const get = (summary: string, reply: unknown, opts: { key?: boolean; params?: string[]; query?: string[] } = {}) => ({
    get: {
      summary,
      ...(opts.key === false ? { security: [] } : { security: keyed }),
      parameters: [
        ...(opts.params ?? []).map((name) => ({ in: 'path', name, required: true, schema: { type: 'string' } })),
        ...(opts.query ?? []).map((name) => ({ in: 'query', name, required: false, schema: { type: 'string' } })),
      ],
      responses: { '200': { description: 'ok', content: json(reply) }, ...errors(400, 401, 404) },
    },
  })
  const object = { type: 'object', additionalProperties: true }
  /** The Messages route: its key also as `x-api-key`, its errors in Anthropic's shape. */
  const messages = (op: ReturnType<typeof post>) => {
    const responses = Object.fromEntries(
      Object.entries(op.post.responses).map(([s, r]) =>
        s === '200' ? [s, r] : [s, { ...r, content: json(ref('AnthropicError')) }],
      ),
    )
    return { post: { ...op.post, security: [{ bearer: [] }, { anthropicKey: [] }, { x402: [] }], responses } }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc: an OpenAI-compatible chat completion marketplace',
      version,
      description:
        'Chat completions, the Responses API and embeddings from independent providers, settled in test USDC. Replies carry an `svc` object (docs/interface.md): request_id, receipt_id, cost_usdc, routing. Errors are one closed set of codes.',
    },
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'svc_test_ followed by 40 base62 characters' },
        anthropicKey: {
          type: 'apiKey',
          in: 'header',
          name: 'x-api-key',
          description: 'the same key, as Anthropic sends it',
        },
        x402: {
          type: 'apiKey',
          in: 'header',
          name: 'PAYMENT-SIGNATURE',
          description: 'no key: an x402 v2 exact payment, on a gateway whose rail takes them (docs/interface.md §5.1)',
        },
      },
      schemas: {
        ChatRequest,
        ResponsesRequest,
        EmbeddingsRequest: EmbeddingsBody,
        MessagesRequest: MessagesBody,
        Capabilities,
        ToolContract,
        Svc: {
          type: 'object',
          description: "the marketplace's extension of every reply",
          properties: {
            request_id: { type: 'string' },
            receipt_id: { type: 'string' },
            cost_usdc: { type: 'string', pattern: '^[0-9]+\\.[0-9]{6}$' },
          },
          required: ['request_id', 'cost_usdc'],
          additionalProperties: true,
        },
        ChatCompletion: {
          type: 'object',
          properties: {
            id: { type: 'string' },
            object: { const: 'chat.completion' },
            choices: { type: 'array', items: object },
            usage: object,
            svc: ref('Svc'),
          },
          required: ['id', 'object', 'choices', 'usage', 'svc'],
        },
        Message: {
          type: 'object',
          description: "Anthropic's Message; errors on this route are Anthropic's shape (AnthropicError)",
          properties: {
            id: { type: 'string' },
            type: { const: 'message' },
            content: { type: 'array', items: object },
            stop_reason: { type: 'string' },
            usage: object,
            svc: ref('Svc'),
          },
          required: ['id', 'type', 'content', 'usage'],
        },
        AnthropicError: {
          type: 'object',
          properties: {
            type: { const: 'error' },
            error: {
              type: 'object',
              properties: { type: { type: 'string' }, message: { type: 'string' }, code: { enum: V1_CODES } },
              required: ['type', 'message'],
            },
            request_id: { type: 'string' },
          },
          required: ['type', 'error'],
        },
        Response: { type: 'object', properties: { id: { type: 'string' }, svc: ref('Svc') }, required: ['id'] },
        Embeddings: {
          type: 'object',
          properties: {
            object: { const: 'list' },
            data: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  object: { const: 'embedding' },
                  index: { type: 'integer' },
                  embedding: { oneOf: [{ type: 'array', items: { type: 'number' } }, { type: 'string' }] },
                },
              },
            },
            usage: {
              type: 'object',
              properties: { prompt_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } },
            },
            svc: ref('Svc'),
          },
          required: ['object', 'data', 'usage', 'svc'],
        },
        Error: {
          type: 'object',
          properties: {
            error: {
              type: 'object',
              properties: {
                type: { type: 'string' },
                code: { enum: V1_CODES },
                message: { type: 'string' },
                param: { type: ['string', 'null'] },
              },
              required: ['type', 'code', 'message', 'param'],
            },
          },
          required: ['error'],
        },
      },
    },
    security: keyed,
    paths: {
      '/v1/chat/completions': post('Chat completions', 'ChatRequest', ref('ChatCompletion'), true),
      '/v1/responses': post('The Responses API', 'ResponsesRequest', ref('Response'), true),
      '/v1/embeddings': post('Embeddings', 'EmbeddingsRequest', ref('Embeddings'), false),
      '/v1/messages': messages(post("Anthropic's Messages API", 'MessagesRequest', ref('Message'), true)),
      '/v1/models': get('The model list', object, { key: false }),
      '/v1/models/{model}': get('One model', object, { key: false, params: ['model'] }),
      '/v1/models/{model}/endpoints': get("A model's offers and what was measured of them", object, {
        key: false,
        params: ['model'],
      }),
      '/v1/usage': get("The key owner's request records, newest first", object, {
        query: ['limit', 'after', 'model', 'key_id'],
      }),
      '/v1/usage/refusals': get('Requests refused before admission, counted per minute', object, {
        query: ['hours'],
      }),
      '/v1/usage/keys': get("The account's keys and their limits", object),
      '/v1/usage/{request_id}': get('One request record with its signed receipt', object, { params: ['request_id'] }),
      '/v1/usage/{request_id}/proof': get("The Merkle proof of a settled request's receipt", object, {
        params: ['request_id'],
      }),
      '/v1/receipts/signer': get('The receipt signers and their EIP-712 domain', object, { key: false }),
      '/v1/openapi.json': get('This document', object, { key: false }),
      '/healthz': get('The process is up', object, { key: false }),
      '/readyz': get('The process can serve (its store answers, its migrations ran)', object, { key: false }),
    },
  }
}

/** The codes /v1 answers with (the portal's own are not among them). */
const PORTAL_ONLY = new Set<ErrorCode>(['session_required', 'sign_in_failed', 'csrf_failed'])
const V1_CODES = (Object.keys(ERROR_TABLE) as ErrorCode[]).filter((c) => !PORTAL_ONLY.has(c))

/** The codes answered with `status`; a status no code has by the table is feature_not_supported's (409, 413). */
function codesOf(status: number): string[] {
  const codes = V1_CODES.filter((c) => ERROR_TABLE[c].status === status)
  return codes.length ? codes : ['feature_not_supported']
}
