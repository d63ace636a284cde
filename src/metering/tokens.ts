import { countText, TextCount } from './o200k.js'
import type { TokenCounter } from './counter.js'

/**
 * Metering version 1 (docs/architecture.md §7): the gateway counts tokens itself with the o200k BPE.
 * Input: each message's text plus a fixed overhead, tool definitions, and the reply priming.
 * Output: delivered content plus tool-call names and arguments.
 */
export const METERING_VERSION = 1

/** o200k as a model's tokenizer, counting without the cache (what it counts is a reply's, seen once). */
export const O200K: TokenCounter = {
  name: 'o200k',
  meteringVersion: METERING_VERSION,
  count: (text, stopAbove) => uncachedCount(text, stopAbove),
}
export const PER_MESSAGE_OVERHEAD = 3
export const REPLY_PRIMING = 3

// Counts of recent strings, cached (agents resend the same history every turn), bounded by entries and by characters;
// texts too long for V8 to hash by content are not kept (docs/architecture.md §15.11).
const CACHE_LIMIT = 4096
const CACHE_CHARS = 8 * 1024 * 1024
const MIN_CACHED_LENGTH = 8
const MAX_CACHED_LENGTH = 16_383
const cache = new Map<string, number>()
/**
 * The cached texts in the order they came, oldest at `oldest`: the next to leave. A Map's first key is no substitute:
 * its iterator steps over the slots of every entry deleted since the table was last rebuilt, slow at this size
 * (docs/performance.md §6).
 */
const order: (string | undefined)[] = new Array<string | undefined>(CACHE_LIMIT)
let oldest = 0
let cachedChars = 0

/** Characters of text the count cache holds now (its bound is CACHE_CHARS). */
export function cachedTextChars(): number {
  return cachedChars
}

/**
 * Token count of one text under o200k, neither looked up in the cache nor kept there (a text seen once), counted no
 * further than past `stopAbove`.
 */
export function uncachedCount(text: string, stopAbove = Infinity): number {
  return countText(text, stopAbove)
}

/**
 * Token count of one text under o200k. A text too long for the cache is counted no further than `stopAbove` (the
 * count is then more than that, and may be less than the text's); a shorter one is counted whole.
 */
export function tokenCount(text: string, stopAbove = Infinity): number {
  if (text.length === 0) return 0
  if (text.length > MAX_CACHED_LENGTH) return countText(text, stopAbove)
  if (text.length < MIN_CACHED_LENGTH) return countText(text)
  return cache.get(text) ?? kept(text, uncachedCount(text))
}

const cacheable = (text: string) => text.length >= MIN_CACHED_LENGTH && text.length <= MAX_CACHED_LENGTH

/**
 * `n`, kept in the cache as the count of `text` (which it does not hold), the oldest texts leaving first to make room.
 */
function kept(text: string, n: number): number {
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
 * Code units of input counted at once, in the turn that asked. A longer input is counted over several turns of the
 * event loop, other requests served between them (docs/architecture.md §15.11).
 */
export const COUNT_AT_ONCE_UNITS = 8192
/** A turn of a long input's count ends after this long (checked every COUNT_CHUNK_UNITS code units)... */
export const COUNT_TURN_MS = 2
/** ...or this many code units, whichever comes first. */
export const COUNT_TURN_UNITS = 32_768
/** Code units counted between two looks at the clock. */
const COUNT_CHUNK_UNITS = 2048

/**
 * Input tokens of a request: messages, definitions (tools and a response schema, as their JSON) and reply priming. Past
 * `stopAbove` (the largest context that could take the request) counting stops: the count is then only known to be
 * more. An input longer than COUNT_AT_ONCE_UNITS is counted over several event-loop turns: its count is a promise,
 * given up once `abandoned` says so. In `counter`, a model's own tokenizer (counted at once), or o200k.
 */
export function countInput(
  messages: readonly MeteredMessage[],
  definitionsJson?: string,
  stopAbove = Infinity,
  { abandoned, counter = O200K }: { abandoned?: () => boolean; counter?: TokenCounter | undefined } = {},
): number | Promise<number> {
  const input = inputOf(messages, definitionsJson)
  // A model's own tokenizer (metering version 2) counts at once, each piece from its own cache.
  if (counter !== O200K) {
    let n = input.fixed
    for (const text of input.texts) if ((n += counter.count(text, stopAbove - n)) > stopAbove) break
    return n
  }
  // An agent's long history is mostly texts the cache knows, which cost nothing: only the others decide.
  if (input.units > COUNT_AT_ONCE_UNITS && uncachedUnits(input.texts) > COUNT_AT_ONCE_UNITS)
    return countInSteps(input, stopAbove, abandoned)
  let n = input.fixed
  for (const text of input.texts) if ((n += tokenCount(text, stopAbove - n)) > stopAbove) break
  return n
}

interface Input {
  /** Tokens besides the texts': the reply's priming, each message's overhead, one for each name. */
  fixed: number
  /** Texts counted as input, in order. */
  texts: string[]
  /** Their code units. */
  units: number
}

function inputOf(messages: readonly MeteredMessage[], definitionsJson: string | undefined): Input {
  const input: Input = { fixed: REPLY_PRIMING, texts: [], units: 0 }
  const add = (text: string) => {
    input.texts.push(text)
    input.units += text.length
  }
  for (const m of messages) {
    input.fixed += PER_MESSAGE_OVERHEAD
    add(m.text)
    if (m.name) {
      input.fixed += 1
      add(m.name)
    }
    for (const c of m.toolCalls ?? []) {
      add(c.id)
      add(c.name)
      add(c.arguments)
    }
    if (m.toolCallId) add(m.toolCallId)
  }
  if (definitionsJson) add(definitionsJson)
  return input
}

/** Code units of `texts` the cache does not know, counted no further than past COUNT_AT_ONCE_UNITS. */
function uncachedUnits(texts: readonly string[]): number {
  let units = 0
  for (const text of texts) {
    if (cacheable(text) && cache.has(text)) continue
    if ((units += text.length) > COUNT_AT_ONCE_UNITS) break
  }
  return units
}

/** A count in steps given up between two of them: the request it was for has no one left to answer. */
export class CountAbandoned extends Error {}

/**
 * A long input's count, taken a piece at a time by the counting turns (`countTurn`); texts the cache knows cost
 * nothing.
 */
class InputCount {
  n: number
  done = false
  /** The next text to count, and the one being counted (with its count so far). */
  private next = 0
  private text = ''
  private count: TextCount | undefined

  private readonly texts: readonly string[]
  private readonly stopAbove: number
  readonly abandoned: (() => boolean) | undefined
  readonly resolve: (n: number) => void
  readonly reject: (err: unknown) => void

  constructor(o: {
    texts: readonly string[]
    fixed: number
    stopAbove: number
    abandoned: (() => boolean) | undefined
    resolve: (n: number) => void
    reject: (err: unknown) => void
  }) {
    this.texts = o.texts
    this.n = o.fixed
    this.stopAbove = o.stopAbove
    this.abandoned = o.abandoned
    this.resolve = o.resolve
    this.reject = o.reject
  }

  /**
   * Counts on over about `budget` more code units (a pre-token, or a long one's piece, is counted whole), or to the
   * end; the code units it counted.
   */
  step(budget: number): number {
    let units = 0
    while (units < budget) {
      if (!this.count) {
        if (this.atEnd()) break
        const text = this.texts[this.next++]!
        const hit = cacheable(text) ? cache.get(text) : undefined
        if (hit !== undefined) {
          this.n += hit
          continue
        }
        this.text = text
        this.count = new TextCount(text, cacheable(text) ? Infinity : this.stopAbove - this.n)
      }
      const before = this.count.position
      const finished = this.count.step(budget - units)
      units += this.count.position - before
      if (!finished) continue
      // Another count may have kept the text meanwhile (the same system prompt in two requests): not kept twice.
      this.n += cacheable(this.text) && !cache.has(this.text) ? kept(this.text, this.count.n) : this.count.n
      this.count = undefined
      this.text = ''
    }
    this.done = !this.count && this.atEnd()
    return units
  }

  /** No text left to count, or the count already past its bound. */
  private atEnd(): boolean {
    return this.n > this.stopAbove || this.next >= this.texts.length
  }
}

/** Long inputs being counted, in the order they take their next piece. */
const counting: InputCount[] = []
let turnAhead = false

/**
 * `countInput` of a long input, in the counting turns. Given up (`CountAbandoned`) once `abandoned` says so between
 * its pieces.
 */
function countInSteps(input: Input, stopAbove: number, abandoned?: () => boolean): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    counting.push(new InputCount({ texts: input.texts, fixed: input.fixed, stopAbove, abandoned, resolve, reject }))
    // The first turn at once, in the request's own callback, as a short input's whole count.
    if (!turnAhead) countTurn()
  })
}

/**
 * One turn of the event loop's counting: the long inputs take COUNT_CHUNK_UNITS each in turn until the turn has spent
 * COUNT_TURN_MS or COUNT_TURN_UNITS; all of them share that one budget (docs/architecture.md §15.11).
 */
function countTurn(): void {
  const ends = performance.now() + COUNT_TURN_MS
  let units = 0
  for (let spent = false; counting.length > 0 && !spent;) {
    const c = counting.shift()!
    try {
      if (c.abandoned?.()) {
        c.reject(new CountAbandoned('the count was given up: its request has no client any more'))
        continue
      }
      units += c.step(Math.min(COUNT_CHUNK_UNITS, COUNT_TURN_UNITS - units))
    } catch (err) {
      c.reject(err)
      continue
    }
    if (c.done) c.resolve(c.n)
    else counting.push(c)
    spent = units >= COUNT_TURN_UNITS || performance.now() >= ends
  }
  turnAhead = counting.length > 0
  if (turnAhead) setImmediate(countTurn)
}

/**
 * Output tokens of a delivered reply, counted without the cache (a reply would push out prompts sent again) and only up
 * to `stopAbove`, the reply's bound, which caps its charge (docs/architecture.md §15.11).
 */
export function countOutput(
  content: string,
  toolCalls: readonly { name: string; arguments: string }[] = [],
  stopAbove = Infinity,
  counter: TokenCounter = O200K,
): number {
  let n = counter.count(content, stopAbove)
  for (const c of toolCalls) {
    if (n > stopAbove) break
    n += (counter === O200K ? tokenCount(c.name) : counter.count(c.name)) + counter.count(c.arguments, stopAbove - n)
  }
  return n
}
