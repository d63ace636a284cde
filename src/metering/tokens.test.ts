import { describe, expect, it, vi } from 'vitest'
import { countText, TextCount } from './o200k.js'
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base'
import {
  cachedTextChars,
  COUNT_AT_ONCE_UNITS,
  COUNT_TURN_UNITS,
  countInput,
  countOutput,
  PER_MESSAGE_OVERHEAD,
  REPLY_PRIMING,
  tokenCount,
  type MeteredMessage,
} from './tokens.js'
import { countedByTurn, turnsDuring } from '../../test/helpers/turns.js'

describe('countInput', () => {
  it('counts a body of long runs of one character quickly, each run merged once', async () => {
    // 240 messages of 16 Ki spaces (4 MB, under 32 Ki tokens): merged whole, each run took over 10 ms.
    const messages = Array.from({ length: 240 }, (_, i) => ({ role: 'user', text: `${i}${' '.repeat(16_370)}x` }))
    const started = performance.now()
    const n = await countInput(messages, undefined, 32_768)
    // Merged whole, the 240 runs took over 2.4 s (the bound leaves room for a busy machine).
    expect(performance.now() - started).toBeLessThan(2_000)
    expect(n).toBeGreaterThan(30_000)
  })

  it('counts a short input at once, and a long one in steps to the same count, letting the event loop go between them', async () => {
    const word = (i: number) => ` w${i.toString(36)}`
    const prose = (from: number, words: number) => Array.from({ length: words }, (_, i) => word(from + i)).join('')
    const messages: MeteredMessage[] = [
      { role: 'system', text: prose(0, 1000) },
      // An agent's history: texts the cache can keep.
      ...Array.from({ length: 24 }, (_, i) => ({
        role: i % 2 ? 'assistant' : 'user',
        text: prose(1000 * (i + 1), 800),
      })),
      { role: 'user', text: prose(100_000, 1000), name: 'ada' },
      {
        role: 'assistant',
        text: '',
        toolCalls: [{ id: 'call_1', name: 'lookup', arguments: JSON.stringify({ q: prose(30_000, 3000) }) }],
      },
      { role: 'tool', text: 'x'.repeat(20_000), toolCallId: 'call_1' },
    ]
    const defs = JSON.stringify([{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }])
    const texts = messages.flatMap((m) => [
      m.text,
      m.name ?? '',
      ...(m.toolCalls ?? []).flatMap((c) => [c.id, c.name, c.arguments]),
      m.toolCallId ?? '',
    ])
    const expected =
      REPLY_PRIMING +
      messages.length * PER_MESSAGE_OVERHEAD +
      1 +
      [...texts, defs].reduce((n, t) => n + countTokens(t), 0)
    const units = [...texts, defs].reduce((n, t) => n + t.length, 0)
    expect(units).toBeGreaterThan(4 * COUNT_TURN_UNITS)

    const first = await countedByTurn(async () => await countInput(messages, defs))
    expect(first.result).toBe(expected)
    // Every code unit counted, in turns of at most COUNT_TURN_UNITS (and a piece of a long pre-token past them).
    expect(first.perTurn.reduce((a, b) => a + b, 0)).toBe(units)
    expect(first.perTurn.length).toBeGreaterThanOrEqual(Math.ceil(units / (COUNT_TURN_UNITS + 1024)))
    expect(Math.max(...first.perTurn)).toBeLessThanOrEqual(COUNT_TURN_UNITS + 1024)
    // The first message alone is short: counted at once, to its own count.
    expect(countInput(messages.slice(0, 1))).toBe(REPLY_PRIMING + PER_MESSAGE_OVERHEAD + countTokens(messages[0]!.text))
    // Counted again in steps, its texts the cache now knows cost nothing.
    const again = await countedByTurn(async () => await countInput(messages, defs))
    expect(again.result).toBe(expected)
    expect(again.perTurn.reduce((a, b) => a + b, 0)).toBeLessThan(units / 2)
  })

  it('keeps a text counted by two requests at once in steps only once', async () => {
    // The same system prompt, too long to count at once and too slow to count in one turn (CJK at random: about a
    // microsecond a character here), in two requests counted together: each finds it missing and counts it.
    let x = 17
    const system = {
      role: 'system',
      text: Array.from({ length: 16_000 }, () =>
        String.fromCharCode(0x4e00 + (((x = (x * 1103515245 + 12345) >>> 0) >>> 16) % 20_000)),
      ).join(''),
    }
    expect(system.text.length).toBeGreaterThan(COUNT_AT_ONCE_UNITS)
    const before = cachedTextChars()
    const asks = [1, 2].map((i) => countInput([system, { role: 'user', text: `question ${i}` }]))
    expect(asks.every((a) => a instanceof Promise)).toBe(true)
    const [a, b] = await Promise.all(asks)
    expect(b).toBe(a)
    expect(cachedTextChars() - before).toBe(system.text.length + 'question 1'.length + 'question 2'.length)
  })

  it('stops a long count in steps past its bound, without counting the rest', async () => {
    const messages = Array.from({ length: 50 }, (_, i) => ({
      role: 'user',
      text: `${i} ${'again and again '.repeat(5000)}`,
    }))
    let n = 0
    const turns = await turnsDuring(async () => (n = await countInput(messages, undefined, 32_768)))
    expect(n).toBeGreaterThan(32_768)
    expect(n).toBeLessThan(32_768 + 100)
    // 32 Ki tokens of this text are about 130 KB: some 20 steps, not the 500 of its 4 MB.
    expect(turns).toBeLessThan(40)
  })

  it("shares one turn's budget among long inputs counted at once, each to its own count", async () => {
    // Eight prompts of random letters (about 2 µs a code unit here), none alike: counted each in turns of its own,
    // eight turns' work ran in every turn of the event loop.
    let x = 29
    const prompts = Array.from({ length: 8 }, (_, i) => [
      {
        role: 'user',
        text: `${i}${Array.from({ length: 40_000 }, () => String.fromCharCode(97 + (((x = (x * 1103515245 + 12345) >>> 0) >>> 16) % 26))).join('')}`,
      },
    ])
    const { result, perTurn } = await countedByTurn(() => Promise.all(prompts.map((p) => countInput(p))))
    // The count of one pass (long pre-tokens are merged in pieces, so not the encoder's).
    expect(result).toEqual(prompts.map((p) => REPLY_PRIMING + PER_MESSAGE_OVERHEAD + countText(p[0]!.text)))
    expect(perTurn.reduce((a, b) => a + b, 0)).toBe(8 * 40_001)
    expect(Math.max(...perTurn)).toBeLessThanOrEqual(COUNT_TURN_UNITS + 1024)
  })

  it('counts a long input at once when the cache knows all but a short part of it', async () => {
    const word = (i: number) => ` v${i.toString(36)}`
    const history: MeteredMessage[] = Array.from({ length: 12 }, (_, i) => ({
      role: i % 2 ? 'assistant' : 'user',
      text: Array.from({ length: 500 }, (_, j) => word(i * 1000 + j)).join(''),
    }))
    const units = history.reduce((n, m) => n + m.text.length, 0)
    expect(units).toBeGreaterThan(2 * COUNT_AT_ONCE_UNITS)
    const first = countInput(history)
    expect(first).toBeInstanceOf(Promise)
    const n = await first
    // The next turn of the conversation: the history the cache kept, and a new question.
    const next = countInput([...history, { role: 'user', text: 'and what about tomorrow?' }])
    expect(next).toBe(n + PER_MESSAGE_OVERHEAD + countTokens('and what about tomorrow?'))
  })
})

describe('tokenCount', () => {
  it('counts ordinary text exactly as the o200k encoder does', () => {
    const texts = [
      'The quick brown fox jumps over the lazy dog, again; numbers 12345 too.\n'.repeat(40),
      'function parse(input: string): number { return Number.parseInt(input, 10) }\n    // indented\n'.repeat(20),
      '中华人民共和国是工人阶级领导的，以工农联盟为基础的人民民主专政的社会主义国家。'.repeat(10),
      'ภาษาไทยเป็นภาษาที่มีระดับเสียงของคำแน่นอน ออกเสียงแยกคำต่อคำ '.repeat(20),
      '{"city":"Paris","unit":"celsius","days":[1,2,3]}',
    ]
    for (const t of texts) expect(tokenCount(t)).toBe(countTokens(t))
  })

  it('keeps no more than a bounded amount of text in its cache, and no text V8 would hash by its length alone', () => {
    // 4096 texts of a megabyte each would be 8 GB kept for counting's sake.
    const big = (i: number) => `${i} ${'word '.repeat(20_000)}`
    const before = cachedTextChars()
    const n = tokenCount(big(0))
    expect(tokenCount(big(0))).toBe(n)
    expect(cachedTextChars()).toBe(before)
    // Texts of cacheable size fill it up to its bound of characters, evicting the oldest.
    const mid = (i: number) => `${String(i).padStart(6, '0')} ${'text '.repeat(3_000)}`
    for (let i = 0; i < 1_000; i++) tokenCount(mid(i))
    expect(cachedTextChars()).toBeLessThanOrEqual(8 * 1024 * 1024)
    expect(cachedTextChars()).toBeGreaterThan(7 * 1024 * 1024)
    expect(tokenCount(mid(999))).toBe(countTokens(mid(999)))
  })

  it('keeps the 4096 texts it saw last, the oldest leaving first, after evictions by characters', () => {
    // Follows the test above, whose texts left by characters: the order kept must still be the texts' own.
    const small = (i: number) => `message ${i}${' again'.repeat(i % 7)}`
    for (let i = 0; i < 10_000; i++) tokenCount(small(i))
    let last = 0
    for (let i = 10_000 - 4096; i < 10_000; i++) last += small(i).length
    expect(cachedTextChars()).toBe(last)
    // A text seen again is not kept twice.
    tokenCount(small(9_999))
    expect(cachedTextChars()).toBe(last)
  })

  it('counts a reply without keeping it', () => {
    tokenCount('get_weather')
    const before = cachedTextChars()
    const reply = 'A reply no request has sent before, counted once. '.repeat(5)
    expect(
      countOutput(reply, [{ name: 'get_weather', arguments: '{"city":"Paris, a city no one asked about before"}' }]),
    ).toBe(
      countTokens(reply) +
        countTokens('get_weather') +
        countTokens('{"city":"Paris, a city no one asked about before"}'),
    )
    expect(cachedTextChars()).toBe(before)
  })

  it('counts a reply no further than past its bound, and exactly below it', () => {
    const calls = [{ name: 'lookup', arguments: '{"q":"a question no one asked before"}' }]
    const reply = 'A reply within its bound. '.repeat(20)
    expect(countOutput(reply, calls, 1_000)).toBe(countOutput(reply, calls))
    // Random letters of the slowest kind: counted whole, 4 MB took seconds; past a bound of 100, a piece or two.
    let x = 5
    const letters = Array.from({ length: 4_000_000 }, () =>
      String.fromCharCode(97 + (((x = (x * 1103515245 + 12345) >>> 0) >>> 16) % 26)),
    ).join('')
    const count = vi.spyOn(TextCount.prototype, 'step')
    try {
      const n = countOutput(letters, calls, 100)
      expect(n).toBeGreaterThan(100)
      expect(n).toBeLessThan(2_000)
      // The arguments were never counted: the reply had passed the bound.
      expect(count).toHaveBeenCalledTimes(1)
      expect(count.mock.contexts[0]!.position).toBeLessThan(20_000)
    } finally {
      count.mockRestore()
    }
  })

  // The encoder merges each pre-token in time quadratic in its length: one request of a few hundred KB of
  // one letter, one CJK character or one punctuation mark used to block the event loop for minutes. Ours is merged
  // whole in O(n log n).
  it.each([
    ['one letter', 'a'.repeat(300_000)],
    ['one CJK character', '字'.repeat(100_000)],
    [
      'random letters without a space',
      Array.from({ length: 300_000 }, (_, i) => String.fromCharCode(97 + ((i * 7919) % 26))).join(''),
    ],
    ['one punctuation mark', '!'.repeat(300_000)],
    ['whitespace', ' '.repeat(300_000)],
    ['whitespace outside ASCII between spaces', '\u3000 \u00a0\u2009'.repeat(75_000)],
    ['emoji', '😀'.repeat(100_000)],
    ['short words with a long run among them', `${'a b '.repeat(50_000)}${'c'.repeat(100_000)}${' d'.repeat(50_000)}`],
    // One pre-token each, though no 64 code points of one class stand in a row: a symbol and a combining mark in
    // turn, and slashes and newlines in turn.
    ['a symbol and a variation selector in turn', ` ${'❤\ufe0f'.repeat(100_000)}`],
    ['a symbol and a combining mark in turn', `!!${'\u0301!'.repeat(100_000)}`],
    ['slashes and newlines in turn', '//\n'.repeat(100_000)],
  ])(
    'counts a long run of %s in bounded time, exactly as the encoder does',
    (_name, text) => {
      const started = performance.now()
      const n = countOutput(text)
      expect(performance.now() - started).toBeLessThan(10_000)
      // The encoder takes minutes over the whole text; its start holds the same long pre-tokens, up to the longest
      // merged whole (1,024 code units). Longer ones are merged in pieces of that length: a cut adds or takes a token
      // or two.
      expect(tokenCount(text.slice(0, 1_000))).toBe(countTokens(text.slice(0, 1_000)))
      const exact = countTokens(text.slice(0, 3_000))
      expect(Math.abs(tokenCount(text.slice(0, 3_000)) - exact)).toBeLessThanOrEqual(Math.max(4, exact * 0.01))
      expect(n).toBeGreaterThan(0)
    },
    120_000,
  )
})
