import ranksByIndex from 'gpt-tokenizer/bpeRanks/o200k_base'

/**
 * o200k's byte-pair merge of one pre-token, counted: the same result as gpt-tokenizer's merge, in O(n log n). Pairs
 * wait in a heap by rank and position; an entry whose rank is no longer its position's is stale (§15.10 of
 * docs/architecture.md).
 */

/** Tokens that are text, by their text. */
const TEXT_RANKS = new Map<string, number>()
/** Tokens whose bytes are not valid UTF-8 alone, sorted by their bytes. */
const BYTE_TOKENS: Uint8Array[] = []
const BYTE_RANKS: number[] = []
/**
 * Tokens of two bytes, by the two (first · 256 + second), as each is looked up above: every pair is rated when a merge
 * begins, and most pairs are two bytes then. The table answers them without a slice and a lookup among 200,000.
 */
const PAIR_RANKS = new Int32Array(65_536).fill(-1)
{
  const bytes: [Uint8Array, number][] = []
  ranksByIndex.forEach((token, rank) => {
    if (typeof token === 'string') {
      TEXT_RANKS.set(token, rank)
      if (token.length <= 2) {
        const utf8 = Buffer.from(token, 'utf8')
        if (utf8.length === 2) PAIR_RANKS[(utf8[0]! << 8) | utf8[1]!] = rank
      }
    } else {
      bytes.push([Uint8Array.from(token), rank])
      // Two bytes that are one character or two are text, looked up as text (and not found) however listed here.
      if (token.length === 2 && !isText(token[0]!, token[1]!)) PAIR_RANKS[(token[0]! << 8) | token[1]!] = rank
    }
  })
  bytes.sort(([a], [b]) => compareBytes(a, 0, a.length, b))
  for (const [token, rank] of bytes) {
    BYTE_TOKENS.push(token)
    BYTE_RANKS.push(rank)
  }
}

/** Whether two bytes are UTF-8 text: two ASCII characters, or one of two bytes. */
function isText(a: number, b: number): boolean {
  return (a < 0x80 && b < 0x80) || (a >= 0xc2 && a <= 0xdf && (b & 0xc0) === 0x80)
}

/** The lexicographic order of `bytes[from, to)` against `token`, a shorter prefix first. */
function compareBytes(bytes: Uint8Array, from: number, to: number, token: Uint8Array): number {
  const n = Math.min(to - from, token.length)
  for (let i = 0; i < n; i++) {
    const d = bytes[from + i]! - token[i]!
    if (d !== 0) return d
  }
  return to - from - token.length
}

/**
 * The longest pre-token merged whole, in UTF-16 code units (about a ms of merging at most). Longer ones are words of
 * no language, or runs of one character: merged in pieces this long (o200k.ts).
 */
export const MAX_MERGED = 1024

const NONE = -1
/** A heap key is rank · 2^12 + position: exact in a double, as ranks are below 2^20 and positions below 3 · 2^10. */
const POSITIONS = 2 ** 12
/** Bytes of UTF-8 in a pre-token of MAX_MERGED code units, at most. */
const MAX_BYTES = 3 * MAX_MERGED

// Work arrays for one merge at a time.
const bytes = new Uint8Array(MAX_BYTES)
/** The UTF-16 index of each byte that starts a character (and of the end). */
const unitAt = new Int32Array(MAX_BYTES + 1)
/** The start of the part after the part starting here; NONE once this part was joined to the one before it. */
const next = new Int32Array(MAX_BYTES + 1)
const prev = new Int32Array(MAX_BYTES + 1)
/** The rank of the pair starting here, or NONE. */
const rankAt = new Int32Array(MAX_BYTES + 1)
/** Pairs' keys: the first pairs, then two for each join at most. */
const heap = new Float64Array(3 * MAX_BYTES)

/** Writes the UTF-8 of `text` (well formed) into `bytes`, each character's start noted in `unitAt`; its length. */
function encode(text: string): number {
  let n = 0
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i)
    unitAt[n] = i
    if (c < 0x80) bytes[n++] = c
    else if (c < 0x800) {
      bytes[n++] = 0xc0 | (c >> 6)
      bytes[n++] = 0x80 | (c & 63)
    } else if (c >= 0xd800 && c < 0xdc00) {
      c = 0x10000 + ((c - 0xd800) << 10) + (text.charCodeAt(++i) - 0xdc00)
      bytes[n++] = 0xf0 | (c >> 18)
      bytes[n++] = 0x80 | ((c >> 12) & 63)
      bytes[n++] = 0x80 | ((c >> 6) & 63)
      bytes[n++] = 0x80 | (c & 63)
    } else {
      bytes[n++] = 0xe0 | (c >> 12)
      bytes[n++] = 0x80 | ((c >> 6) & 63)
      bytes[n++] = 0x80 | (c & 63)
    }
  }
  unitAt[n] = text.length
  return n
}

/** The rank of the token `bytes[from, to)` of `text` (`n` bytes in all), or NONE. */
function rankOf(text: string, n: number, from: number, to: number): number {
  if (to - from === 2) return PAIR_RANKS[(bytes[from]! << 8) | bytes[from + 1]!]!
  if ((to === n || (bytes[to]! & 0xc0) !== 0x80) && (bytes[from]! & 0xc0) !== 0x80) {
    return TEXT_RANKS.get(text.slice(unitAt[from], unitAt[to])) ?? NONE
  }
  let lo = 0
  let hi = BYTE_TOKENS.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    const d = compareBytes(bytes, from, to, BYTE_TOKENS[mid]!)
    if (d === 0) return BYTE_RANKS[mid]!
    if (d > 0) lo = mid + 1
    else hi = mid - 1
  }
  return NONE
}

let heapSize = 0

/** ES2024's method, in Node 20 but not in the ES2023 library. */
type WellFormed = string & { toWellFormed(): string }

function push(key: number): void {
  let i = heapSize++
  while (i > 0) {
    const up = (i - 1) >> 1
    if (heap[up]! <= key) break
    heap[i] = heap[up]!
    i = up
  }
  heap[i] = key
}

function pop(): number {
  const top = heap[0]!
  const last = heap[--heapSize]!
  let i = 0
  for (;;) {
    let child = 2 * i + 1
    if (child >= heapSize) break
    if (child + 1 < heapSize && heap[child + 1]! < heap[child]!) child++
    if (heap[child]! >= last) break
    heap[i] = heap[child]!
    i = child
  }
  heap[i] = last
  return top
}

/** Notes the rank of the pair starting at `at` (its part and the next), queued when it is a token. */
function rate(text: string, n: number, at: number): void {
  const second = next[at]!
  const end = second < n ? next[second]! : NONE
  const rank = end === NONE ? NONE : rankOf(text, n, at, end)
  rankAt[at] = rank
  if (rank !== NONE) push(rank * POSITIONS + at)
}

/** The number of o200k tokens of one pre-token of at most MAX_MERGED code units (special tokens' text is text). */
export function preTokenCount(preToken: string): number {
  if (TEXT_RANKS.has(preToken)) return 1
  if (preToken.length > MAX_MERGED)
    throw new RangeError(`a pre-token of ${preToken.length} code units is merged in pieces`)
  // A lone surrogate is U+FFFD in UTF-8, and so in its pairs' text.
  const text = (preToken as WellFormed).toWellFormed()
  const n = encode(text)
  for (let i = 0; i <= n; i++) {
    next[i] = i + 1
    prev[i] = i - 1
  }
  heapSize = 0
  for (let i = 0; i < n - 1; i++) rate(text, n, i)
  let parts = n
  while (heapSize > 0) {
    const key = pop()
    const rank = Math.floor(key / POSITIONS)
    const at = key - rank * POSITIONS
    if (next[at] === NONE || rankAt[at] !== rank) continue
    const joined = next[at]!
    const after = next[joined]!
    next[joined] = NONE
    next[at] = after
    prev[after] = at
    parts--
    rate(text, n, at)
    if (at > 0) rate(text, n, prev[at]!)
  }
  return parts
}
