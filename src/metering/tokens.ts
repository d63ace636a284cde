import { countTokens } from 'gpt-tokenizer/encoding/o200k_base'

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
const order: string[] = new Array<string>(CACHE_LIMIT)
let oldest = 0
let cachedChars = 0

/** Characters of text the count cache holds now (its bound is CACHE_CHARS). */
export function cachedTextChars(): number {
  return cachedChars
}

/**
 * The encoder merges each pre-token (a run of letters, of punctuation or of whitespace) in time quadratic in its
 * length: a few hundred KB of one letter blocked the event loop for minutes. Runs this long are cut into pieces of
 * this many code points, each counted alone; ordinary text has no such runs and counts exactly, a cut adds a token or two.
 */
const MAX_RUN = 64
/** A run of MAX_RUN or more letters, whitespace, or other symbols, matched from its start only (linear scan). */
const LONG_RUN = /(?<![\p{L}\p{M}])[\p{L}\p{M}]{64,}|(?<!\s)\s{64,}|(?<![^\s\p{L}\p{M}\p{N}])[^\s\p{L}\p{M}\p{N}]{64,}/gu
const PIECE = /[\s\S]{1,64}/gu

/** Whether `c` is a code unit JavaScript's `\s` matches (ECMAScript's WhiteSpace and LineTerminator). */
function isSpace(c: number): boolean {
  if (c < 0x80) return c === 32 || (c >= 9 && c <= 13)
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
}

/**
 * Whether `text` may hold a run LONG_RUN matches. Each of its runs is MAX_RUN or more code points, all of them
 * whitespace or none of them: without MAX_RUN code units of either in a row, it has none. A loop over the code units
 * is about ten times quicker than the expression, and ordinary prose never reaches the length.
 */
function mayHoldLongRun(text: string): boolean {
  let spaces = 0
  let others = 0
  for (let i = 0; i < text.length; i++) {
    if (isSpace(text.charCodeAt(i))) {
      others = 0
      if (++spaces >= MAX_RUN) return true
    } else {
      spaces = 0
      if (++others >= MAX_RUN) return true
    }
  }
  return false
}

function boundedCount(text: string): number {
  if (!mayHoldLongRun(text)) return countTokens(text)
  let n = 0
  let last = 0
  for (const m of text.matchAll(LONG_RUN)) {
    if (m.index > last) n += countTokens(text.slice(last, m.index))
    for (const [piece] of m[0].matchAll(PIECE)) n += countTokens(piece)
    last = m.index + m[0].length
  }
  if (last === 0) return countTokens(text)
  return last < text.length ? n + countTokens(text.slice(last)) : n
}

/** Token count of one text under o200k, neither looked up in the cache nor kept there (a text seen once). */
export function uncachedCount(text: string): number {
  return text.length < MAX_RUN ? countTokens(text) : boundedCount(text)
}

/** Token count of one text under o200k. */
export function tokenCount(text: string): number {
  if (text.length === 0) return 0
  if (text.length < MIN_CACHED_LENGTH) return countTokens(text)
  if (text.length > MAX_CACHED_LENGTH) return boundedCount(text)
  const hit = cache.get(text)
  if (hit !== undefined) return hit
  const n = uncachedCount(text)
  while (cache.size >= CACHE_LIMIT || cachedChars + text.length > CACHE_CHARS) {
    const gone = order[oldest]!
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
  let n = content.length === 0 ? 0 : uncachedCount(content)
  for (const c of toolCalls) n += tokenCount(c.name) + (c.arguments.length === 0 ? 0 : uncachedCount(c.arguments))
  return n
}
