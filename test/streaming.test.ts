import { describe, expect, it } from 'vitest'
import { chat, marketPerTest } from './helpers/market.js'

const market = marketPerTest()

const body = {
  model: 'svc/atlas@1',
  messages: [{ role: 'user', content: 'stream please' }],
  stream: true,
  max_tokens: 20,
}

/** Reads the raw SSE text, noting when each piece arrived. */
async function timed(res: Response): Promise<{ at: number; text: string }[]> {
  const start = performance.now()
  const out: { at: number; text: string }[] = []
  const reader = res.body!.getReader()
  const dec = new TextDecoder()
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return out
    out.push({ at: performance.now() - start, text: dec.decode(value) })
  }
}

describe('streaming', () => {
  it('forwards content as it arrives instead of buffering the answer', async () => {
    const mk = await market({ sim: { chunkDelayMs: 60 } })
    const pieces = await timed(await chat(mk.url, mk.key, body))
    const firstContent = pieces.find((p) => p.text.includes('"content":"') && !p.text.includes('"content":""'))!
    const end = pieces.at(-1)!
    // 12 words at 60 ms: the first word must reach the client long before the last.
    expect(end.at - firstContent.at).toBeGreaterThan(400)
    expect(pieces.filter((p) => p.text.includes('"content":"')).length).toBeGreaterThan(6)
  })

  it('sends keep-alive comments while waiting for the first byte, then the reply', async () => {
    const mk = await market({ tuning: { keepAliveMs: 100, firstByteTimeoutMs: 2_000 } })
    mk.sims.atlasCheap.setFault({ kind: 'slow', ms: 450 })
    const res = await chat(mk.url, mk.key, body)
    expect(res.status).toBe(200)
    const text = (await timed(res)).map((p) => p.text).join('')
    const keepAlives = text.split('\n\n').filter((e) => e === ': keep-alive')
    expect(keepAlives.length).toBeGreaterThanOrEqual(2)
    expect(text.indexOf(': keep-alive')).toBeLessThan(text.indexOf('data: '))
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
    expect(text).toContain('"svc":{')
  })

  it('ends with an error chunk when every offer fails after keep-alives committed the status line', async () => {
    const mk = await market({ tuning: { keepAliveMs: 100, firstByteTimeoutMs: 350 } })
    mk.sims.atlasCheap.setFault({ kind: 'slow', ms: 5_000 })
    mk.sims.atlasDear.setFault({ kind: 'slow', ms: 5_000 })
    const res = await chat(mk.url, mk.key, body)
    expect(res.status).toBe(200)
    const events = (await timed(res))
      .map((p) => p.text)
      .join('')
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
    expect(events.at(-1)).toBe('data: [DONE]')
    // After the status line a stream's error chunk carries one of the spec's two codes; the message says why.
    const error = JSON.parse(events.at(-2)!.slice(6)).error
    expect(error).toMatchObject({ type: 'api_error', code: 'stream_interrupted' })
    expect(error.message).toMatch(/retry after \d+ s/i)
    expect((await mk.store.accounts.byId(mk.accountId))!.held).toBe(0n)
  })
})
