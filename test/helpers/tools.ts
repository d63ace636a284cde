import { expect } from 'vitest'
import type { Market } from './market.js'

/** Tools the tool-calling tests declare; the simulator fills their arguments from the schemas. */
export const WEATHER = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
}
export const TIME = {
  type: 'function' as const,
  function: {
    name: 'get_time',
    description: 'Local time in a timezone',
    parameters: { type: 'object', properties: { timezone: { type: 'string' } }, required: ['timezone'] },
  },
}
export const WEATHER_ARGS = '{"city":"Paris","unit":"celsius"}'
export const TIME_ARGS = '{"timezone":"Europe/Paris"}'

/** A tool whose argument document the simulator writes at `bytes` bytes exactly (`{"document":"document…x"}`). */
export function documentTool(bytes: number) {
  return {
    type: 'function' as const,
    function: {
      name: 'save_document',
      parameters: {
        type: 'object',
        properties: { document: { type: 'string', minLength: bytes - 15 } },
        required: ['document'],
      },
    },
  }
}

/** Resets every simulator of the market to its defaults, so tests do not depend on each other's order. */
export function resetSims(m: Market): void {
  for (const sim of Object.values(m.sims)) {
    sim.setFault({ kind: 'none' })
    sim.settings = {
      ...sim.settings,
      fragmentation: 'split',
      toolPreface: '',
      chunkDelayMs: 0,
      dialect: 'openai',
      reasoningTokens: 0,
    }
  }
}

export interface Snapshot {
  balance: bigint
  held: bigint
}

export async function snapshot(m: Market): Promise<Snapshot> {
  const a = (await m.store.accounts.byId(m.accountId))!
  return { balance: a.balance, held: a.held }
}

/** Asserts the account is exactly as it was: nothing charged, nothing left held. */
export async function expectUnchanged(m: Market, before: Snapshot): Promise<void> {
  expect(await snapshot(m)).toEqual(before)
}

/** Requests every simulator has received so far. */
export function upstreamRequests(m: Market): number {
  return Object.values(m.sims).reduce((n, s) => n + s.stats.requests, 0)
}

export interface Chunk {
  id: string
  object: string
  model: string
  system_fingerprint?: string
  choices: { index: number; delta: Record<string, unknown>; finish_reason: string | null }[]
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
  svc?: { cost_usdc: string; provider: string; request_id: string }
  error?: { type: string; code: string; message: string }
}

/** The JSON chunks of an SSE body, checking it ends with exactly one [DONE]. */
export function parseChunks(events: string[]): Chunk[] {
  expect(events.at(-1)).toBe('[DONE]')
  expect(events.filter((e) => e === '[DONE]')).toHaveLength(1)
  return events.slice(0, -1).map((e) => JSON.parse(e))
}
