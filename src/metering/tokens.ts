import { countTokens } from 'gpt-tokenizer/encoding/o200k_base'

/**
 * Metering version 1 (DESIGN §7): the gateway counts tokens itself with the o200k BPE.
 * Input: each message's text plus a fixed overhead, tool definitions, and the reply priming.
 * Output: delivered content plus tool-call names and arguments.
 */
export const METERING_VERSION = 1
export const PER_MESSAGE_OVERHEAD = 3
export const REPLY_PRIMING = 3

// Agents resend the same history every turn; caching counts of recent strings makes that cheap.
const CACHE_LIMIT = 4096
const MIN_CACHED_LENGTH = 8
const cache = new Map<string, number>()

/** Token count of one text under o200k. */
export function tokenCount(text: string): number {
  if (text.length === 0) return 0
  if (text.length < MIN_CACHED_LENGTH) return countTokens(text)
  const hit = cache.get(text)
  if (hit !== undefined) return hit
  const n = countTokens(text)
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value as string)
  cache.set(text, n)
  return n
}

export interface MeteredMessage {
  role: string
  /** Text of the message, parts already joined. */
  text: string
  name?: string
  /** Tool calls of an assistant message in the history: names and arguments count as input. */
  toolCalls?: { name: string; arguments: string }[]
}

/** Input tokens of a request: messages, tool definitions (as their JSON), and reply priming. */
export function countInput(messages: readonly MeteredMessage[], toolsJson?: string): number {
  let n = REPLY_PRIMING
  for (const m of messages) {
    n += PER_MESSAGE_OVERHEAD + tokenCount(m.text)
    if (m.name) n += 1 + tokenCount(m.name)
    if (m.toolCalls) for (const c of m.toolCalls) n += tokenCount(c.name) + tokenCount(c.arguments)
  }
  if (toolsJson) n += tokenCount(toolsJson)
  return n
}

/** Output tokens of a delivered reply. */
export function countOutput(content: string, toolCalls: readonly { name: string; arguments: string }[] = []): number {
  let n = tokenCount(content)
  for (const c of toolCalls) n += tokenCount(c.name) + tokenCount(c.arguments)
  return n
}
