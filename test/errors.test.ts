import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chat, startMarket, type Market } from './helpers/market.js'
import { expectError } from './helpers/errors.js'

let m: Market
beforeAll(async () => {
  m = await startMarket()
})
afterAll(() => m?.close())

const msgs = [{ role: 'user', content: 'hi' }]

describe('validation', () => {
  const cases: [string, unknown, number, string, string | null][] = [
    ['malformed JSON', '{"model": "svc/atlas@1", "messages": [', 400, 'feature_not_supported', null],
    ['a body that is not an object', '[1,2]', 400, 'feature_not_supported', null],
    ['missing model', { messages: msgs }, 400, 'feature_not_supported', 'model'],
    ['missing messages', { model: 'svc/atlas@1' }, 400, 'feature_not_supported', 'messages'],
    ['empty messages', { model: 'svc/atlas@1', messages: [] }, 400, 'feature_not_supported', 'messages'],
    ['wrong-typed model', { model: 42, messages: msgs }, 400, 'feature_not_supported', 'model'],
    [
      'unknown role',
      { model: 'svc/atlas@1', messages: [{ role: 'robot', content: 'x' }] },
      400,
      'feature_not_supported',
      'messages[0].role',
    ],
    [
      'wrong-typed content',
      { model: 'svc/atlas@1', messages: [msgs[0], { role: 'user', content: 5 }] },
      400,
      'feature_not_supported',
      'messages[1].content',
    ],
    [
      'an image part whose URL is neither https nor a data URL',
      { model: 'svc/atlas@1', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] },
      400,
      'feature_not_supported',
      'messages[0].content[0].image_url',
    ],
    [
      'an image part to a model that takes no images',
      {
        model: 'svc/atlas@1',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }],
      },
      400,
      'feature_not_supported',
      'messages',
    ],
    [
      'max_tokens not an integer',
      { model: 'svc/atlas@1', messages: msgs, max_tokens: 1.5 },
      400,
      'feature_not_supported',
      'max_tokens',
    ],
    [
      'max_tokens zero',
      { model: 'svc/atlas@1', messages: msgs, max_tokens: 0 },
      400,
      'feature_not_supported',
      'max_tokens',
    ],
    [
      'max_tokens above maxOutputTokens',
      { model: 'svc/atlas@1', messages: msgs, max_tokens: 5000 },
      400,
      'feature_not_supported',
      'max_tokens',
    ],
    [
      'max_completion_tokens above maxOutputTokens',
      { model: 'svc/wren@1', messages: msgs, max_completion_tokens: 300 },
      400,
      'feature_not_supported',
      'max_completion_tokens',
    ],
    [
      'prompt + max_tokens over the context',
      { model: 'svc/wren@1', messages: [{ role: 'user', content: 'word '.repeat(400) }], max_tokens: 200 },
      400,
      'feature_not_supported',
      'max_tokens',
    ],
    [
      'a prompt alone over the context',
      { model: 'svc/wren@1', messages: [{ role: 'user', content: 'word '.repeat(600) }] },
      400,
      'feature_not_supported',
      'messages',
    ],
    // No max_tokens could make room: the prompt is at fault.
    [
      'a prompt alone over the context, with max_tokens',
      { model: 'svc/wren@1', messages: [{ role: 'user', content: 'word '.repeat(600) }], max_tokens: 5 },
      400,
      'feature_not_supported',
      'messages',
    ],
    [
      'stream on a model that cannot stream',
      { model: 'svc/quill@1', messages: msgs, stream: true },
      400,
      'feature_not_supported',
      'stream',
    ],
    [
      'stream not a boolean',
      { model: 'svc/atlas@1', messages: msgs, stream: 'yes' },
      400,
      'feature_not_supported',
      'stream',
    ],
    ['n above 1', { model: 'svc/atlas@1', messages: msgs, n: 2 }, 400, 'feature_not_supported', 'n'],
    [
      'temperature out of range',
      { model: 'svc/atlas@1', messages: msgs, temperature: 3 },
      400,
      'feature_not_supported',
      'temperature',
    ],
    ['unknown model', { model: 'svc/nope@1', messages: msgs }, 404, 'model_not_found', 'model'],
    ['a vendor model name', { model: 'gpt-4o', messages: msgs }, 404, 'model_not_found', 'model'],
  ]
  it('reads a body that starts with a byte-order mark', async () => {
    const res = await chat(
      m.url,
      m.key,
      `\ufeff${JSON.stringify({ model: 'svc/atlas@1', messages: msgs, max_tokens: 5 })}`,
    )
    expect(res.status).toBe(200)
  })

  // An optional field's message names its limit, not only that the value is neither null nor of its type.
  it.each([
    [{ max_tokens: 0 }, 'max_tokens', /max_tokens: expected integer to be greater or equal to 1/],
    [{ temperature: 7 }, 'temperature', /temperature: expected number to be less or equal to 2/],
    [{ stream: 'yes' }, 'stream', /stream: expected boolean/],
    [
      { stream_options: { include_usage: 'x' } },
      'stream_options.include_usage',
      /stream_options\.include_usage: expected boolean/,
    ],
  ])('says what an optional field must be: %j', async (extra, param, message) => {
    const res = await chat(m.url, m.key, { model: 'svc/atlas@1', messages: msgs, ...extra })
    expect((await expectError(res, 400, 'feature_not_supported', param)).message).toMatch(message)
  })

  it.each(cases)('%s', async (...[, body, status, code, param]) => {
    const before = (await m.store.accounts.byId(m.accountId))!
    await expectError(await chat(m.url, m.key, body), status, code, param)
    const after = (await m.store.accounts.byId(m.accountId))!
    expect(after.balance).toBe(before.balance)
    expect(after.held).toBe(before.held)
  })

  it('accepts unknown fields and the standard optional parameters', async () => {
    const res = await chat(m.url, m.key, {
      model: 'svc/atlas@1',
      messages: [
        { role: 'system', content: 'be brief' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hi' },
            { type: 'text', text: 'there' },
          ],
        },
      ],
      temperature: 0.2,
      top_p: 0.9,
      stop: ['\n\n'],
      seed: 7,
      user: 'u1',
      n: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      logit_bias: { '50256': -100 },
      stream_options: null,
      metadata: { run: 'a' },
      some_vendor_extra: { anything: true },
      max_completion_tokens: 20,
    })
    expect(res.status).toBe(200)
    const forwarded = m.sims.atlasCheap.requests.at(-1)!
    expect(forwarded).toMatchObject({
      model: 'atlas',
      temperature: 0.2,
      top_p: 0.9,
      stop: ['\n\n'],
      seed: 7,
      user: 'u1',
      max_tokens: 20,
    })
    expect(forwarded).not.toHaveProperty('some_vendor_extra')
    expect(forwarded).not.toHaveProperty('n')
    expect((forwarded.messages as { content: string }[])[1]!.content).toBe('hi\nthere')
  })

  it('answers a body over 4 MiB with 413 feature_not_supported', async () => {
    const big = JSON.stringify({
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'x'.repeat(4 * 1024 * 1024 + 10) }],
    })
    await expectError(await chat(m.url, m.key, big), 413, 'feature_not_supported', null)
  })

  it('parses JSON sent without a JSON content type (curl -d)', async () => {
    const res = await chat(
      m.url,
      m.key,
      { model: 'svc/atlas@1', messages: msgs },
      { 'content-type': 'application/x-www-form-urlencoded' },
    )
    expect(res.status).toBe(200)
  })

  it('answers unknown endpoints with a 404 in the error shape', async () => {
    const res = await fetch(`${m.url}/v1/audio/speech`, {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json' },
    })
    await expectError(res, 404, 'feature_not_supported', null)
  })
})

describe('request ids', () => {
  it('are on every response and unique', async () => {
    const a = await fetch(`${m.url}/v1/models`)
    const b = await fetch(`${m.url}/v1/models`)
    expect(a.headers.get('x-request-id')).toMatch(/^req_[0-9A-Z]{26}$/)
    expect(a.headers.get('x-request-id')).not.toBe(b.headers.get('x-request-id'))
  })
})
