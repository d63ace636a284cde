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

/**
 * Token count of one text under o200k. A text too long for the cache is counted no further than `stopAbove` (the
 * count is then more than that, and may be less than the text's); a shorter one is counted whole.
 */
export function tokenCount(text: string, stopAbove = Infinity): number {
  if (text.length === 0) return 0
  if (text.length < MIN_CACHED_LENGTH) return countText(text)
  if (text.length > MAX_CACHED_LENGTH) return countText(text, stopAbove)
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
  /** Tool calls of an assistant message in the history: ids, names and arguments count as input. */
  toolCalls?: { id: string; name: string; arguments: string }[]
  /** The call a tool message answers: counted as input. */
  toolCallId?: string
}

/**
 * Input tokens of a request: messages, definitions (tools and a response schema, as their JSON), and reply priming.
 * Counting stops once the count passes `stopAbove` (the largest context that could take the request): the count is
 * then only known to be more than that. A prompt of a few MB of letters without a space takes seconds to count whole.
 */
export function countInput(messages: readonly MeteredMessage[], definitionsJson?: string, stopAbove = Infinity): number {
  let n = REPLY_PRIMING
  const count = (text: string) => (n += tokenCount(text, stopAbove - n)) > stopAbove
  for (const m of messages) {
    n += PER_MESSAGE_OVERHEAD
    if (count(m.text)) return n
    if (m.name) {
      n += 1
      if (count(m.name)) return n
    }
    for (const c of m.toolCalls ?? []) if (count(c.id) || count(c.name) || count(c.arguments)) return n
    if (m.toolCallId && count(m.toolCallId)) return n
  }
  if (definitionsJson) count(definitionsJson)
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
