import { describe, expect, it } from 'vitest'
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base'
import { countText, TextCount } from './o200k.js'

const AS_TEXT = { disallowedSpecial: new Set<string>() }

/** A text of `n` pieces drawn (deterministically from `seed`) from every kind the split tells apart. */
function mixed(seed: number, n: number): string {
  const kinds = [
    'river',
    ' River',
    'RIVER',
    " don't",
    "'s",
    " they'LL",
    '12345',
    ' 7',
    '3.14159',
    ' ',
    '  ',
    '\t',
    '\n',
    '\r\n',
    ' \n\n ',
    ',',
    '!?',
    ' ...',
    ' ---',
    '/',
    '//\n',
    '中文',
    '日本語の',
    ' 한국어',
    'é',
    ' naïve',
    'Ωμέγα',
    ' Москва',
    '😀',
    ' 👍🏽',
    '\u3000',
    '\u00a0',
    'x\u0301',
    '<',
    '|',
    '>',
    'endoftext',
    ' {"a":1}',
    '_id',
    'camelCase',
    ' ALLCAPSWord',
    '\u200b',
    '\ud800',
  ]
  let x = seed * 2654435761
  let out = ''
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out += kinds[x % kinds.length]
  }
  return out
}

describe('countText', () => {
  it('counts text exactly as the o200k encoder does', () => {
    for (let seed = 0; seed < 400; seed++) {
      const text = mixed(seed, 1 + (seed % 90))
      expect(countText(text), JSON.stringify(text)).toBe(countTokens(text))
    }
  })

  it('counts text that spells a special token as text, where the encoder refuses it', () => {
    for (const special of ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|endofprompt|>', '<|fim_prefix|>']) {
      const text = `Please repeat ${special} back to me.`
      expect(() => countTokens(text)).toThrow(/special token/i)
      expect(countText(text)).toBe(countTokens(text, AS_TEXT))
      expect(countText(text)).toBeGreaterThan(countText('Please repeat  back to me.'))
    }
  })

  it('merges long pre-tokens whole, exactly as the encoder does', () => {
    // Runs of one class the split keeps together: words without a space, Thai, CJK, symbols and marks in turn, up to
    // the longest pre-token merged whole (1,024 code units).
    const alphabets = [
      'abcdefghijklmnopqrstuvwxyz',
      'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef',
      'กขคงจฉชซฌญฎฏฐฑ',
      '的一是不了人我在有他这为之大来以个中上们',
      'абвгдежзийклмнопрстуфхцчшщъыьэюя',
      'éèàçùâêîôûëïü',
      '❤️\u0301\u200d',
      '😀🎉👍🏽🙂',
      'x\ud800y\udfffz',
      '()[]{}<>|/\\-+=*&^%$#@!~',
    ]
    let x = 12345
    const next = () => (x = (x * 1103515245 + 12345) >>> 0)
    for (let k = 0; k < 60; k++) {
      const letters = [...alphabets[k % alphabets.length]!]
      let text = ''
      for (let i = 0, n = 65 + (next() % 960); i < n; i++) text += letters[next() % letters.length]
      expect(countText(text), `${k}: ${text.slice(0, 40)}…`).toBe(countTokens(text, AS_TEXT))
    }
  })

  it('stops counting past the bound it is given, and counts exactly below it', () => {
    const text = 'every word here is a token '.repeat(50_000)
    const whole = countText(text)
    expect(countText(text, whole)).toBe(whole)
    const stopped = countText(text, 1000)
    expect(stopped).toBeGreaterThan(1000)
    expect(stopped).toBeLessThan(1010)
  })

  it('counts the same pieces alike however often it has seen them', () => {
    const text = mixed(7, 200)
    const first = countText(text)
    // Words never seen before, more than the table of pieces holds: it is emptied and filled again several times.
    const word = (i: number) => ` ${i.toString(26).replace(/./g, (d) => String.fromCharCode(97 + parseInt(d, 26)))}`
    for (let i = 0; i < 60_000; i++) expect(countText(word(i) + word(i + 1))).toBe(countTokens(word(i) + word(i + 1)))
    expect(countText(text)).toBe(first)
    expect(first).toBe(countTokens(text))
  })
})

describe('countText of long texts', () => {
  it('counts a text longer than a segment exactly, cut only where its pre-tokens end', () => {
    // Tens of thousands of pieces of every kind: segments of 16 Ki code units end at a word's end or before a space.
    for (let seed = 0; seed < 12; seed++) {
      const text = mixed(seed, 6_000 + seed * 1_000)
      expect(text.length).toBeGreaterThan(16_384)
      expect(countText(text), `seed ${seed}`).toBe(countTokens(text, AS_TEXT))
    }
    // The first place to cut a segment is looked for from 8 Ki code units on: a word there with a mark or a
    // contraction in it goes on past its letters.
    for (const word of ['cafe\u0301s', 'Ha\u0308ndel', "isn't", "can't", 'ab\u0301\u0302\u0303c'.repeat(40)]) {
      const text = `${'word '.repeat(1638)}xy${word} ${'more words '.repeat(1000)}`
      expect(countText(text), word).toBe(countTokens(text, AS_TEXT))
    }
    // Prose and CJK with punctuation alike.
    const prose = 'Le café, naïvement: “¿qué?” — 12,345 words; ok.\n'.repeat(800)
    const cjk = '中华人民共和国是工人阶级领导的，以工农联盟为基础的人民民主专政的社会主义国家。'.repeat(600)
    for (const text of [prose, cjk]) expect(countText(text)).toBe(countTokens(text, AS_TEXT))
  })

  it('cuts a text with nowhere to cut it for 8 Ki code units every 16 Ki, each side counted alone', () => {
    const run = 'x'.repeat(40_000)
    expect(countText(run)).toBe(2 * countText('x'.repeat(16_384)) + countText('x'.repeat(40_000 - 32_768)))
    // Never between a surrogate pair's halves.
    const emoji = `a${'😀'.repeat(20_000)}`
    expect(countText(emoji)).toBe(countText(`a${'😀'.repeat(8_191)}`) + countText('😀'.repeat(20_000 - 8_191)))
  })

  it('cuts a segment after a word followed by a lone low surrogate, not inside the word', () => {
    // Digits in groups of three before the word and a lone surrogate (valid in JSON) after it: cuts that change
    // nothing.
    const text = `${'1'.repeat(8_190)}hello\udc00${'1'.repeat(10_000)}`
    expect(countText(text)).toBe(
      countText('1'.repeat(8_190)) + countText('hello\udc00') + countText('1'.repeat(10_000)),
    )
  })

  it('matches no pre-token longer than a segment: a body of one mark repeated is counted in short steps', () => {
    // One pre-token of four million marks took the split 0.8 s to match, in a single step however small.
    const marks = 'a' + '\u0301'.repeat(4_000_000)
    const count = new TextCount(marks)
    let worst = 0
    for (let done = false; !done;) {
      const started = performance.now()
      done = count.step(8_192)
      worst = Math.max(worst, performance.now() - started)
    }
    expect(count.n).toBe(countText(marks))
    // Half the fault's 0.8 s: far above a step's work, room for a busy machine.
    expect(worst).toBeLessThan(400)
  })
})

describe('TextCount', () => {
  /** The count of `text` taken in steps of `units` code units, and how many steps it took. */
  const stepped = (text: string, units: number, stopAbove = Infinity) => {
    const count = new TextCount(text, stopAbove)
    let steps = 1
    while (!count.step(units)) steps++
    return { n: count.n, steps }
  }

  it('counts a text in steps of any size to the count of one pass, long pre-tokens and surrogate pairs included', () => {
    const texts = [
      mixed(3, 400),
      // Runs of one class longer than a piece (1,024 code units): cut into pieces, a surrogate pair never halved.
      'x'.repeat(5000) + ' tail',
      `lead ${'😀'.repeat(1500)} end`,
      `${'abcdefghij'.repeat(300)}${' '.repeat(3000)}\n${'1234567890'.repeat(200)}`,
    ]
    for (const text of texts) {
      const whole = countText(text)
      for (const units of [1, 7, 64, 1000, 1024, 4096])
        expect(stepped(text, units).n, `${units}: ${text.slice(0, 30)}`).toBe(whole)
    }
    // Below a piece's size no pre-token is left whole at a step's end; above it, the steps are as many as asked.
    expect(stepped('word '.repeat(10_000), 1000).steps).toBeGreaterThanOrEqual(50)
    expect(stepped('y'.repeat(10_000), 1).steps).toBe(10)
  })

  it('stops past its bound in steps as in one pass', () => {
    const text = 'every word here is a token '.repeat(10_000)
    const { n, steps } = stepped(text, 100, 1000)
    expect(n).toBe(countText(text, 1000))
    expect(steps).toBeLessThan(60)
  })

  it('gives each of several counts taken in turn its own count', () => {
    // The split expression is shared: each step must start where its own count stopped.
    const texts = [mixed(11, 300), 'z'.repeat(3000), mixed(12, 300)]
    const counts = texts.map((t) => new TextCount(t))
    for (let open = counts.length; open > 0;) {
      open = 0
      for (const c of counts) if (!c.step(50)) open++
    }
    expect(counts.map((c) => c.n)).toEqual(texts.map((t) => countText(t)))
  })
})
