import { countText } from './o200k.js'

/**
 * Metering version 1 (DESIGN §7): the gateway counts tokens itself with the o200k BPE.
 * Input: each message's text plus a fixed overhead, tool definitions, and the reply priming.
 * Output: delivered content plus tool-call names and arguments.
 */
export const METERING_VERSION = 1
export const PER_MESSAGE_OVERHEAD = 3
export const REPLY_PRIMING = 3

// Agents resend the same history every turn; caching counts of recent strings makes that cheap. Bounded by entries and
// by the characters they hold (a client could otherwise make it keep 4096 texts of 1 MB each); texts longer than V8
// hashes by content (it hashes longer strings by their length alone, so equal-length keys would all collide) are not
// kept at all.
const CACHE_LIMIT = 4096
const CACHE_CHARS = 8 * 1024 * 1024
const MIN_CACHED_LENGTH = 8
const MAX_CACHED_LENGTH = 16_383
const cache = new Map<string, number>()
/**
 * The cached texts in the order they came, oldest at `oldest`: the next to leave. A Map's first key is no substitute:
 * its iterator steps over the slots of every entry deleted since the table was last rebuilt, about a microsecond a
 * lookup at this size.
 */
const order: (string | undefined)[] = new Array<string | undefined>(CACHE_LIMIT)
let oldest = 0
let cachedChars = 0

/** Characters of text the count cache holds now (its bound is CACHE_CHARS). */
export function cachedTextChars(): number {
  return cachedChars
}

/** Token count of one text under o200k, neither looked up in the cache nor kept there (a text seen once). */
export function uncachedCount(text: string): number {
  return countText(text)
}

/** Token count of one text under o200k. */
export function tokenCount(text: string): number {
  if (text.length === 0) return 0
  if (text.length < MIN_CACHED_LENGTH || text.length > MAX_CACHED_LENGTH) return countText(text)
  const hit = cache.get(text)
  if (hit !== undefined) return hit
  const n = uncachedCount(text)
  while (cache.size > 0 && (cache.size >= CACHE_LIMIT || cachedChars + text.length > CACHE_CHARS)) {
    const gone = order[oldest]!
    // Not kept by the ring either, which would hold it until its slot came round again.
    order[oldest] = undefined
    oldest = (oldest + 1) % CACHE_LIMIT
    cache.delete(gone)
    cachedChars -= gone.length
  }
  order[(oldest + cache.size) % CACHE_LIMIT] = text
  cache.set(text, n)
  cachedChars += text.length
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

/** Input tokens of a request: messages, definitions (tools and a response schema, as their JSON), and reply priming. */
export function countInput(messages: readonly MeteredMessage[], definitionsJson?: string): number {
  let n = REPLY_PRIMING
  for (const m of messages) {
    n += PER_MESSAGE_OVERHEAD + tokenCount(m.text)
    if (m.name) n += 1 + tokenCount(m.name)
    if (m.toolCalls) for (const c of m.toolCalls) n += tokenCount(c.name) + tokenCount(c.arguments)
  }
  if (definitionsJson) n += tokenCount(definitionsJson)
  return n
}

/**
 * Output tokens of a delivered reply. Its text and arguments are new, so they are counted without the cache: kept
 * there, each reply would push out a prompt that the next requests may send again (a reply comes back as history only
 * on its conversation's next turn, which a busy gateway's cache does not last until).
 */
export function countOutput(content: string, toolCalls: readonly { name: string; arguments: string }[] = []): number {
  let n = uncachedCount(content)
  for (const c of toolCalls) n += tokenCount(c.name) + uncachedCount(c.arguments)
  return n
}
