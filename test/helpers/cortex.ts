import { expect } from 'vitest'
import { chat, sseEvents, type Market } from './market.js'

/** A request to svc/cortex@1 of 20 tokens at most, with `extra`'s fields. */
export const ask = (extra: Record<string, unknown> = {}) => ({
  model: 'svc/cortex@1',
  messages: [{ role: 'user', content: 'route me' }],
  max_tokens: 20,
  ...extra,
})

export interface Served {
  model: string
  fingerprint: string
  usage: { prompt_tokens: number; completion_tokens: number }
  svc: {
    cost_usdc: string
    provider: string
    request_id: string
    routing: { model: string; served_by: string; vendor_fallback: boolean; status: string }
  }
}

/** Sends the request plain or streamed and returns what matters of the reply. */
export async function send(mk: Market, stream: boolean, extra: Record<string, unknown> = {}): Promise<Served> {
  const res = await chat(mk.url, mk.key, ask({ ...extra, stream }))
  expect(res.status, await res.clone().text()).toBe(200)
  if (!stream) {
    const r = await res.json()
    return { model: r.model, fingerprint: r.system_fingerprint, usage: r.usage, svc: r.svc }
  }
  const events = await sseEvents(res)
  expect(events.at(-1)).toBe('[DONE]')
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e))
  const usage = chunks.at(-2).usage
  return { model: chunks[0].model, fingerprint: chunks[0].system_fingerprint, usage, svc: chunks.at(-1).svc }
}
